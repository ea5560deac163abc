"""`lactchain train-actor`: tune the actor on preference pairs with SimPO, DPO or KTO (LoRA)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from lactchain.cli.common import (
    DbOption,
    DetachOption,
    JsonOption,
    LineLog,
    RunIdOption,
    check_models,
    check_references,
    console,
    err_console,
    fail,
    finite,
    open_registry,
    positive,
    run_job,
)
from lactchain.cli.play_cmd import ActorOption, AdapterOption, load_actor

LOSS_CHOICES = ("simpo", "dpo", "kto", "rft")
LABELERS = ("critic", "human", "llm", "episodes", "any")


def resolve_checkpoint(registry: Any, spec: Optional[str]) -> Optional[str]:
    """A checkpoint folder from a path, or from a run id's latest `checkpoint` artifact."""
    if not spec:
        return None
    if Path(spec).is_dir():
        return str(Path(spec))
    from lactchain.resume import latest_checkpoint

    try:
        run = registry.get_run(spec)
    except KeyError as exc:
        fail(f"--resume-from {spec}: neither a checkpoint folder nor a run id ({exc})")
    if run["kind"] != "actor":
        fail(f"--resume-from {spec}: run {run['id']} is a {run['kind']} run; expected actor")
    art = latest_checkpoint(registry, run["id"], "checkpoint")  # back through earlier resumes if needed
    if art is None:
        fail(f"--resume-from {spec}: run {run['id']} (and the runs it resumed) kept no checkpoint on disk")
    return art["path"]


def render_summary(result: dict[str, Any]) -> None:
    table = Table(title=f"train-actor {result['run_id']} ({result['loss_type']})", show_header=False)
    table.add_row("steps", str(result["steps"]))
    table.add_row("pairs", str(result["pairs"]))
    for key, value in result["final_metrics"].items():
        table.add_row(key, f"{value:.4g}")
    if result.get("s_per_step"):
        table.add_row("s / step", f"{result['s_per_step']:.3f}")
    table.add_row("adapter", result["adapter"])
    console.print(table)
    for w in result["warnings"]:
        console.print(f"[bold yellow]warning[/] [{w['code']}] at step {w['step']}: {w['message']}")


def train_actor_cmd(
    ctx: typer.Context,
    loss: Annotated[str, typer.Option("--loss", help="simpo (CPO trainer, loss_type=simpo), dpo, kto, or rft (fine-tune on the chosen side only: best-of-K).")] = "simpo",
    pairs_from: Annotated[
        Optional[list[str]],
        typer.Option("--pairs-from", help="Take pairs from this run (repeatable). Default: every run in the registry."),
    ] = None,
    labeler: Annotated[str, typer.Option("--labeler", help="Only pairs from this labeler: critic, human, llm, episodes or any.")] = "any",
    actor: ActorOption = "smollm2-135m",
    adapter: AdapterOption = None,
    epochs: Annotated[float, typer.Option("--epochs", callback=positive, help="Passes over the pairs (ignored with --max-steps).")] = 1.0,
    max_steps: Annotated[Optional[int], typer.Option("--max-steps", min=1, help="Stop after this many optimizer steps.")] = None,
    lr: Annotated[float, typer.Option("--lr", callback=positive, help="Learning rate of the LoRA weights.")] = 5e-5,
    batch_size: Annotated[int, typer.Option("--batch-size", "-b", min=1, help="Pairs per optimizer step.")] = 8,
    beta: Annotated[
        Optional[float],
        typer.Option("--beta", callback=finite, help="Default per loss: simpo 2.5 (authors' range 2-10), dpo 0.1, kto 0.1."),
    ] = None,
    simpo_gamma: Annotated[
        Optional[float],
        typer.Option("--simpo-gamma", callback=finite, help="SimPO target margin gamma itself (default 0.5 x beta; gamma/beta must stay in 0-1)."),
    ] = None,
    cpo_alpha: Annotated[float, typer.Option("--cpo-alpha", callback=finite, min=0.0, help="SimPO only: weight of an NLL term on chosen (CPO alpha; 0 = plain SimPO).")] = 0.0,
    lora_r: Annotated[int, typer.Option("--lora-r", min=1, max=1024, help="LoRA rank.")] = 8,
    lora_alpha: Annotated[int, typer.Option("--lora-alpha", min=1, max=4096, help="LoRA alpha.")] = 16,
    save_steps: Annotated[int, typer.Option("--save-steps", min=1, help="Checkpoint every N steps (and on SIGTERM).")] = 25,
    resume: Annotated[
        Optional[str],
        typer.Option("--resume-from", "--resume",
                     help="Continue from a checkpoint folder, or a train-actor run id's latest checkpoint "
                          "(`lactchain runs resume` passes --resume-from RUN_ID)."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1, help="Seed for LoRA init, data order and dropout.")] = 0,
    db: DbOption = None,
    detach: DetachOption = False,
    run_id: RunIdOption = None,
    as_json: JsonOption = False,
) -> None:
    """Tune an actor on preference pairs (SimPO by default) and save a LoRA adapter.

    Pairs come from the registry (`--pairs-from RUN_ID`, `--labeler`); pairs with
    chosen == rejected or not yet labeled are dropped and counted. Metrics stream
    to the registry every step, checkpoints every --save-steps and on SIGTERM,
    and known failure signatures (loss stuck at ln 2, accuracy 1.0 from the
    start, chosen log-prob falling) are recorded as warnings. The adapter (LoRA
    weights only) is saved to runs/<id>/adapter; use it with `--adapter <id>`.
    """
    from lactchain.train.actor import NoUsablePairs, resolve_hparams, select_pairs

    if loss not in LOSS_CHOICES:
        raise typer.BadParameter(f"must be one of {', '.join(LOSS_CHOICES)}", param_hint="--loss")
    if cpo_alpha and loss != "simpo":
        raise typer.BadParameter("only applies to --loss simpo", param_hint="--cpo-alpha")
    if loss == "rft" and resume:
        raise typer.BadParameter("rft runs are short and do not checkpoint; start a new run", param_hint="--resume-from")
    if labeler not in LABELERS:
        raise typer.BadParameter(f"must be one of {', '.join(LABELERS)}", param_hint="--labeler")
    try:
        resolve_hparams(loss, beta, simpo_gamma)
    except ValueError as exc:
        fail(f"--beta/--simpo-gamma: {exc}")
    if run_id is None:
        # Fail before creating (or scheduling) a run when there is nothing to train on.
        check_models(actor)
        registry = open_registry(db)
        check_references(registry, ctx.params)
        resolve_checkpoint(registry, resume)
        try:
            select_pairs(registry, pairs_from, labeler)
        except NoUsablePairs as exc:
            fail(str(exc))
    params = dict(loss=loss, pairs_from=list(pairs_from or []), labeler=labeler, actor=actor, adapter=adapter,
                  epochs=epochs, max_steps=max_steps, lr=lr, batch_size=batch_size, beta=beta,
                  simpo_gamma=simpo_gamma, cpo_alpha=cpo_alpha, lora_r=lora_r, lora_alpha=lora_alpha, save_steps=save_steps,
                  resume=resume, seed=seed)

    def body(handle) -> dict[str, Any]:
        from lactchain.train.actor import train_actor
        from lactchain.train.actor_config import TrainActorJobConfig

        selection = select_pairs(handle.registry, pairs_from, labeler)
        stats = selection.stats()
        handle.log_metrics({"pairs_used": stats["pairs"], "pairs_dropped_identical": stats["dropped_identical"],
                            "pairs_dropped_unlabeled": stats["dropped_unlabeled"]}, step=0)
        err_console.print(f"{stats['pairs']} pairs ({stats['found']} found, {stats['dropped_identical']} with "
                          f"chosen == rejected, {stats['dropped_unlabeled']} unlabeled dropped)")
        checkpoint = resolve_checkpoint(handle.registry, resume)
        model = load_actor(actor, adapter, handle.registry, quiet=as_json)
        with Progress(TextColumn(f"[bold]{loss}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[stats]}"),
                      TimeElapsedColumn(), console=err_console, transient=as_json) as bar:
            task = bar.add_task("steps", total=max_steps, stats="")
            line = LineLog()

            def on_log(step: int, total: int, metrics: dict[str, float]) -> None:
                shown = [f"{k} {metrics[k]:.3g}" for k in ("loss", "margin", "accuracy") if k in metrics]
                bar.update(task, completed=step, total=total or None, stats="  ".join(shown))
                line(f"step {step}/{total or '?'}: " + ", ".join(shown), force=step == total)

            result = train_actor(model, selection, TrainActorJobConfig.from_params(params), handle=handle,
                                 resume_from_checkpoint=checkpoint, on_log=on_log)
        result["pair_stats"] = stats
        if result["cancelled"]:
            err_console.print(f"stopped at step {result['steps']}; checkpoint saved, resume with "
                              f"`lactchain runs resume {handle.run_id}`")
        return result

    run_job(ctx, kind="actor", db=db, detach=detach, run_id=run_id, params=params, body=body, as_json=as_json,
            name=f"train-actor {loss} {actor}", render=render_summary)
