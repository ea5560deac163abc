"""`lactchain train-critic`: fit the critic's V and Q to Monte-Carlo returns of play runs."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from lactchain.cli.common import (DbOption, DetachOption, EnvOption, JsonOption, LineLog, RunIdOption, check_models,
                                  check_references, console, err_console, fail, finite, open_registry,
                                  positive, run_job)

CriticOption = Annotated[
    str,
    typer.Option("--critic", help="Critic backbone: minilm-l6, sfr-embedding-mistral, tiny, tiny-causal, or a local model folder."),
]


def render_summary(result: dict[str, Any]) -> None:
    table = Table(title=f"train-critic {result['run_id']}", show_header=False)
    for key in ("critic", "episodes", "train_steps", "val_steps", "start_epoch", "epochs"):
        table.add_row(key, str(result[key]))
    for key, value in result["metrics"].items():
        table.add_row(key, "-" if value is None else f"{value:.4f}")
    table.add_row("checkpoint", str(result["checkpoint"]))
    console.print(table)


def train_critic(
    ctx: typer.Context,
    episodes_from: Annotated[
        list[str],
        typer.Option("--episodes-from", "-e", help="A play run whose stored steps to learn from (repeat for several)."),
    ],
    critic: CriticOption = "minilm-l6",
    epochs: Annotated[int, typer.Option("--epochs", min=1, help="Passes over the training steps.")] = 5,
    gamma: Annotated[float, typer.Option("--gamma", callback=finite, min=0.0, max=0.999999, help="Discount per action.")] = 0.9,
    lr: Annotated[float, typer.Option("--lr", callback=positive, help="AdamW learning rate (LoRA + heads).")] = 5e-4,
    batch_size: Annotated[
        int, typer.Option("--batch-size", "-b", min=2, help="Stored steps (state, return samples) per optimizer step.")
    ] = 64,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**32 - 1, help="Seed for the train/val split, shuffles and head init.")] = 0,
    lora_r: Annotated[int, typer.Option("--lora-r", min=1, max=1024, help="LoRA rank.")] = 8,
    q_weight: Annotated[float, typer.Option("--q-weight", callback=finite, min=0.0, help="Weight of the Q(s, moves) loss; 0 trains V only.")] = 1.0,
    resume_from: Annotated[
        Optional[str], typer.Option("--resume-from", help="Continue from the last checkpoint of this train-critic run.")
    ] = None,
    env: EnvOption = "grid",
    db: DbOption = None,
    detach: DetachOption = False,
    run_id: RunIdOption = None,
    as_json: JsonOption = False,
) -> None:
    """Train the critic (V(s) and Q(s, moves)) on the steps of play runs.

    Monte-Carlo discounted returns per episode; train/validation split by episode;
    per epoch: train/val loss, explained variance on val and the Spearman rank
    correlation of V with the exact V* over the env's start states. A checkpoint
    (artifact kind "critic") is saved every epoch and on SIGTERM. The play runs must
    have played --env.
    """
    from lactchain.returns import usable_steps

    check_models(critic=critic)
    with open_registry(db) as registry:
        check_references(registry, ctx.params, kind="critic")
        episodes_from = [registry.resolve_run_id(r) for r in episodes_from]
        if resume_from:
            resume_from = registry.resolve_run_id(resume_from)
        usable, stored = usable_steps(registry, episodes_from)
        played = {r: registry.params(r).get("env", "grid") for r in episodes_from}
    other = {r: e for r, e in played.items() if e != env}
    if other:
        fail(f"--episodes-from {' '.join(other)} played {', '.join(sorted(set(other.values())))}, not {env}; "
             f"pass play runs of --env {env} (or --env {next(iter(other.values()))})")
    if usable < 2:
        fail(f"--episodes-from {' '.join(episodes_from)}: {usable} step(s) of finished episodes ({stored} stored; "
             "episodes cut off by a kill have no return); play more episodes")
    # Keys = keyword arguments of lactchain.train.critic.train_critic, so
    # `runs resume` can call train_critic(handle, **params, resume=True).
    params = dict(episodes_from=episodes_from, critic=critic, epochs=epochs, gamma=gamma, lr=lr,
                  batch_size=batch_size, seed=seed, lora_r=lora_r, q_weight=q_weight, resume_from=resume_from, env=env)

    def body(handle) -> dict[str, Any]:
        from lactchain.train.critic import TrainCriticConfig, train_critic as fit

        with Progress(TextColumn("[bold]train-critic"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[stats]}"),
                      TimeElapsedColumn(), console=err_console, transient=as_json) as bar:
            task = bar.add_task("epochs", total=epochs, stats="loading data and model")

            def on_batch(done: int, total: int) -> None:
                stats = bar.tasks[0].fields.get("last", "")
                bar.update(task, stats=f"batch {done}/{total}" + (f"  {stats}" if stats else ""))

            line = LineLog(every_s=0.0)

            def on_epoch(epoch: int, m: dict[str, float]) -> None:
                last = f"loss {m['train_loss']:.3f}"
                if "val_loss" in m:
                    last += f"  val {m['val_loss']:.3f}  EV {m['val_explained_variance']:.2f}"
                last += f"  spearman(V, V*) {m['spearman_vstar']:.2f}"
                bar.update(task, completed=epoch, last=last, stats=last)
                line(f"epoch {epoch}/{epochs}: {last}")

            return fit(handle, TrainCriticConfig.from_params(params), on_epoch=on_epoch, on_batch=on_batch)

    run_job(ctx, kind="critic", db=db, detach=detach, run_id=run_id, params=params, body=body, as_json=as_json,
            name=f"train-critic {critic}", render=render_summary)
