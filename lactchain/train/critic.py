"""Monte-Carlo critic training, readable top to bottom (CleanRL spirit).

1. Load the steps of the given play runs from the registry, group them by
   episode, order each by t and compute discounted returns backwards:
   G_t = r_t + gamma * G_{t+1}, with G = 0 after the last step.
   Episodes that ended by truncation (out of actions) rather than termination
   simply use the return that was observed: no bootstrapping, so such a return
   under-counts what would have come next. That is the Monte-Carlo estimate of
   the behaviour policy's value with the episode's own horizon; fine for ranking
   states and move lists, which is what the critic is for.
2. Split by EPISODE (never by step: steps of one episode are correlated) into
   train / validation, seeded.
3. Targets are normalised with the mean/std of the training returns; the
   critic stores them so its values come back in reward units.
4. Each epoch: shuffled mini-batches, loss = MSE(V(s), G) + q_weight * MSE(Q(s, moves), G)
   (both in normalised units), AdamW on LoRA + heads, learning rate annealed
   linearly to 0 over all epochs (so the last epochs settle). Then metrics:
   train loss, val loss, explained variance of V on val, and the Spearman rank
   correlation of V with the env solver's exact V* over the env's start states
   (the grid's non-goal poses: a goal cell is terminal, V* is 0 by definition,
   so it carries no information about what the critic learnt; Blackjack's deals).
5. A checkpoint (critic.save + optimizer state) per epoch, recorded as a registry
   artifact of kind "critic" with step = epoch (1-based). On SIGTERM the job's
   `on_cancel` hook saves one more (meta complete=False) if any batch ran since.
6. Resume: `resume=True` continues from this run's latest critic checkpoint,
   `config.resume_from=RUN_ID` from another run's; epochs already done are skipped and
   the optimizer state is restored. Splits and shuffles are functions of the
   seed and the epoch number, so a resumed run sees the same batches.
"""

from __future__ import annotations

import math
import random
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from lactchain.runs.checkpoints import seal
from lactchain.runs.files import read_tensors
from lactchain.loop.returns import Sample, discounted_returns, load_samples, samples_from_steps, split_by_episode  # noqa: F401
from lactchain.train.critic_config import TrainCriticConfig
from lactchain.train.ranks import spearman
from lactchain.paths import writing
from lactchain.train.ddp import (any_rank, average_gradients, is_main_process, rank, same_start, sum_over_ranks,
                                 world_size)

CHECKPOINT_KIND = "critic"
OPTIMIZER_NAME = "optimizer.pt"


# ---- metrics ------------------------------------------------------------------------------

def explained_variance(pred: Sequence[float], target: Sequence[float]) -> float:
    """1 - Var(target - pred) / Var(target): 1 is perfect, 0 is no better than the mean."""
    y, p = np.asarray(target, dtype=float), np.asarray(pred, dtype=float)
    var = y.var()
    return float("nan") if var == 0 else float(1.0 - (y - p).var() / var)


def spearman_vs_optimal(critic: Any, gamma: float) -> float:
    """Spearman rank correlation of V with the exact V* over every start state of the env."""
    vstar = critic.env.solver().values(gamma)
    states = list(critic.env.start_states())
    return spearman(critic.values(states), [vstar[s] for s in states])


# ---- 2-6. training --------------------------------------------------------------------------

def _batches(n: int, batch_size: int, seed: int, least: int = 2) -> list[list[int]]:
    """Shuffled batches; a last one smaller than `least` joins the one before (BatchNorm
    needs two samples, on every rank of a DDP run: 2 per process)."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    batches = [order[i : i + max(batch_size, least)] for i in range(0, n, max(batch_size, least))]
    if len(batches) > 1 and len(batches[-1]) < least:
        batches[-2].extend(batches.pop())
    return batches


def _loss(critic: Any, batch: Sequence[Sample], q_weight: float) -> tuple[torch.Tensor, float, float]:
    states = [s.state for s in batch]
    target = torch.tensor([(s.ret - critic.value_mean) / critic.value_std for s in batch], device=critic.device)
    v_loss = torch.nn.functional.mse_loss(critic.forward_values(critic.state_texts(states)), target)
    loss, q_item = v_loss, float("nan")
    if q_weight > 0:
        q_loss = torch.nn.functional.mse_loss(critic.forward_q(critic.q_texts(states, [s.moves for s in batch])), target)
        loss, q_item = v_loss + q_weight * q_loss, q_loss.item()
    return loss, v_loss.item(), q_item


def _evaluate(critic: Any, val: Sequence[Sample], q_weight: float) -> dict[str, float]:
    if not val:
        return {}
    states = [s.state for s in val]
    rets = [s.ret for s in val]
    v = np.asarray(critic.values(states))
    scale = critic.value_std ** 2
    out = {
        "val_loss": float(((v - np.asarray(rets)) ** 2).mean() / scale),  # normalised units, like train_loss
        "val_explained_variance": explained_variance(v, rets),
    }
    if q_weight > 0:
        q = np.asarray(critic.q_values(states, [s.moves for s in val]))
        out["val_q_loss"] = float(((q - np.asarray(rets)) ** 2).mean() / scale)
    return out


def _resume_point(registry: Any, run_id: str, resume: bool, resume_from: str | None) -> dict[str, Any] | None:
    """The checkpoint to start from: this run's own latest when resuming it (it is
    newer than anything it started from), else `resume_from`'s latest, else None."""
    from lactchain.runs.resume import latest_checkpoint

    if resume:
        own = latest_checkpoint(registry, run_id, CHECKPOINT_KIND)
        if own is not None:
            return own
    if resume_from:

        source = registry.resolve_run_id(resume_from)
        art = latest_checkpoint(registry, source, CHECKPOINT_KIND)  # back through earlier resumes if needed
        if art is None:
            raise FileNotFoundError(f"run {source} has no {CHECKPOINT_KIND} checkpoint to resume from")
        return art
    return None  # fresh start (also: resume=True before the first checkpoint was written)


def _start(c: TrainCriticConfig, registry: Any, run_id: str, resume: bool, device: str | None,
           train: Sequence[Sample]) -> tuple[Any, dict[str, Any] | None, int, int]:
    """(critic, the checkpoint it resumes or None, epochs done, batches of the next epoch
    already trained): fresh, its targets normalised by the training returns, or as the
    checkpoint left it (a partial one, written on SIGTERM, says how far its epoch got)."""
    from lactchain.models.critic import Critic

    start = _resume_point(registry, run_id, resume, c.resume_from)
    if start is None:
        model = Critic.load(c.critic, lora_r=c.lora_r, device=device, env_kwargs=c.built_env_kwargs(), env=c.env)
        rets = np.asarray([s.ret for s in train])
        model.set_target_stats(rets.mean(), rets.std())
        return model, None, 0, 0
    model = Critic.load(checkpoint=start["path"], device=device)
    meta = start.get("meta") or {}
    skip_batches = int(meta.get("batches_done", 0)) if meta.get("complete") is False else 0
    return model, start, int(start["step"] or 0), skip_batches


class _Checkpoints:
    """A critic run's checkpoints (artifact kind "critic", step = epoch): one per epoch,
    and a partial one on SIGTERM if any batch ran since the last (`batches_done` of the
    next epoch, which a resume skips)."""

    def __init__(self, handle: Any, model: Any, optimizer: torch.optim.Optimizer, epoch: int, batches_done: int,
                 last_path: str | None) -> None:
        self.handle, self.model, self.optimizer = handle, model, optimizer
        self.epoch, self.batches_done, self.batches_since_save, self.last_path = epoch, batches_done, 0, last_path

    def save(self, complete: bool, metrics: Mapping[str, float] | None = None) -> Path:
        epoch = self.epoch
        name = f"epoch-{epoch:03d}" if complete else f"epoch-{epoch:03d}-partial-{int(time.time())}"
        folder = self.model.save(Path(self.handle.dir) / "critic" / name)
        with writing(folder, "the critic's optimizer"):
            torch.save(self.optimizer.state_dict(), folder / OPTIMIZER_NAME)
        meta = {"epoch": epoch, "complete": complete, **{k: v for k, v in (metrics or {}).items() if v == v}}
        if not complete:
            meta["batches_done"] = self.batches_done  # of epoch + 1: a resume skips them
        seal(folder)  # last: a folder without a whole manifest is not a checkpoint to resume from
        self.handle.registry.add_artifact(self.handle.run_id, CHECKPOINT_KIND, folder, step=epoch, meta=meta)
        self.batches_since_save, self.last_path = 0, str(folder)
        return folder

    def on_cancel(self) -> None:
        if self.batches_since_save:
            self.save(complete=False)


def _train_epoch(model: Any, optimizer: torch.optim.Optimizer, saves: _Checkpoints, handle: Any,
                 train: Sequence[Sample], config: TrainCriticConfig, epoch: int,
                 on_batch: Callable[[int, int], None] | None) -> tuple[tuple[float, float, float, int], int, int]:
    """One epoch's batches, those after a partial checkpoint's, with the learning rate annealed
    linearly to 0 over the whole run (CleanRL's anneal_lr): ((summed loss, V loss, Q loss, rows)
    over this rank's rows, the epoch's batches, the batches skipped)."""
    c = config
    world, me = world_size(), rank()
    model.train()
    batches = _batches(len(train), c.batch_size, c.seed * 100_003 + epoch, least=2 * world)
    tot, tot_v, tot_q, n = 0.0, 0.0, 0.0, 0
    skipped = saves.batches_done
    for i, idx in enumerate(batches):
        if i < skipped:
            continue  # trained before the partial checkpoint this run resumed from
        if any_rank(handle.cancelled.is_set())[0]:  # DDP: every rank stops at the same batch
            handle.cancelled.set()
            handle.check_cancelled()
        for group in optimizer.param_groups:
            group["lr"] = c.lr * (1.0 - ((epoch - 1) + i / len(batches)) / c.epochs)
        whole = [train[j] for j in idx]
        batch = whole[me::world]  # this rank's slice of the global batch (all of it alone)
        loss, v_item, q_item = _loss(model, batch, c.q_weight)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        average_gradients(model.trainable_parameters(), len(batch) / len(whole))
        optimizer.step()
        saves.batches_since_save += 1
        saves.batches_done = i + 1
        k = len(batch)
        tot, tot_v, n = tot + loss.item() * k, tot_v + v_item * k, n + k
        tot_q += (q_item if c.q_weight > 0 else 0.0) * k
        if on_batch is not None:
            on_batch(i + 1, len(batches))
    return (tot, tot_v, tot_q, n), len(batches), skipped


def train_critic(
    handle: Any,
    config: TrainCriticConfig,
    *,
    resume: bool = False,
    device: str | None = None,
    on_epoch: Callable[[int, dict[str, float]], None] | None = None,
    on_batch: Callable[[int, int, int], None] | None = None,
) -> dict[str, Any]:
    """Fit V and Q of a critic to Monte-Carlo returns of the steps of `config.episodes_from` runs.

    `handle` is a `lactchain.jobs.RunHandle` (registry, run_id, dir, log_metrics,
    on_cancel, check_cancelled). `config` is the run's recorded params, so
    `lactchain runs resume` can call
    `train_critic(handle, TrainCriticConfig.from_params(params), resume=True)`.
    `on_epoch(epoch, metrics)` / `on_batch(epoch, done, total)` (batches of that epoch)
    feed progress displays.
    Returns the final metrics, the checkpoint path and data sizes.
    """
    t_start = time.perf_counter()
    registry = handle.registry
    c = config
    epochs, gamma, lr, batch_size, seed, q_weight = c.epochs, c.gamma, c.lr, c.batch_size, c.seed, c.q_weight
    torch.manual_seed(seed)

    # 1-2. data
    run_ids = [registry.resolve_run_id(r) for r in c.episodes_from]
    samples = load_samples(registry, run_ids, gamma)
    if not samples:
        raise ValueError(f"runs {', '.join(run_ids) or '(none)'} have no steps to learn from")
    train, val = split_by_episode(samples, c.val_fraction, seed)
    if len(train) < 2:
        raise ValueError(f"only {len(train)} training step(s) in runs {', '.join(run_ids)}; play more episodes")

    # 3. model: fresh, or from the checkpoint we resume; 5. its checkpoints
    model, start, done_epochs, skip_batches = _start(c, registry, handle.run_id, resume, device, train)
    same_start(model.trainable_parameters())  # DDP: every rank from rank 0's weights
    model.batch_size = max(batch_size, 1)
    optimizer = torch.optim.AdamW(model.trainable_parameters(), lr=lr, weight_decay=c.weight_decay)
    if start is not None and (Path(start["path"]) / OPTIMIZER_NAME).is_file():
        optimizer.load_state_dict(read_tensors(Path(start["path"]) / OPTIMIZER_NAME, "critic checkpoint",
                                                device=model.device))
    saves = _Checkpoints(handle, model, optimizer, done_epochs, skip_batches, start["path"] if start else None)
    handle.on_cancel(saves.on_cancel)

    # 4. epochs
    metrics: dict[str, float] = {}
    for epoch in range(done_epochs + 1, epochs + 1):
        t0 = time.perf_counter()
        batch_done = None if on_batch is None else (lambda done, total, e=epoch: on_batch(e, done, total))
        (tot, tot_v, tot_q, n), n_batches, skipped = _train_epoch(model, optimizer, saves, handle, train, c, epoch,
                                                                   batch_done)
        saves.epoch, saves.batches_done = epoch, 0
        seconds = time.perf_counter() - t0
        tot, tot_v, tot_q, n = sum_over_ranks(tot, tot_v, tot_q, n)  # the whole global batches' losses
        if not is_main_process():  # rank 0 evaluates, logs and checkpoints; the others go on training
            metrics = {"train_loss": tot / max(n, 1)}
            continue
        metrics = {
            # over the batches this run trained (a resumed epoch: those after its partial checkpoint)
            "train_loss": tot / max(n, 1),
            "train_v_loss": tot_v / max(n, 1),
            **({"train_q_loss": tot_q / max(n, 1)} if q_weight > 0 else {}),
            **_evaluate(model, val, q_weight),
            "spearman_vstar": spearman_vs_optimal(model, gamma),
            "epoch_batches": float(n_batches - skipped),
            "epoch_seconds": seconds,
            "batches_per_s": (n_batches - skipped) / seconds if seconds > 0 else 0.0,  # those it trained
        }
        handle.log_metrics(metrics, step=epoch)
        saves.save(complete=True, metrics=metrics)
        if on_epoch is not None:
            on_epoch(epoch, metrics)

    if not metrics and start is None:
        metrics = {"spearman_vstar": spearman_vs_optimal(model, gamma)}
    return {
        "critic": model.spec,
        "epochs": epochs,
        "start_epoch": done_epochs,
        "episodes": len({s.episode for s in samples}),
        "truncated_episodes": len({s.episode for s in samples if s.truncated}),
        "train_steps": len(train),
        "val_steps": len(val),
        "value_mean": model.value_mean,
        "value_std": model.value_std,
        "metrics": {k: (v if not (isinstance(v, float) and math.isnan(v)) else None) for k, v in metrics.items()},
        "checkpoint": saves.last_path,
        "seconds": time.perf_counter() - t_start,
    }
