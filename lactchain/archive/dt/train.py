"""Training the decision transformer: a resumable registry job (`lactchain dt train`).

1. Data: the archive run's trajectories, each with its instruction (`data.instruction`),
   split by trajectory (seeded) into train / validation (held out: what `dt eval`
   reports), and a model-selection split carved out of train (`select_fraction`).
2. Text: a word-level tokenizer learned on the training instructions, or a frozen
   sentence encoder, or none (the no-text behaviour-cloning baseline).
3. Steps: batches drawn with a generator seeded by (seed, step), so a resumed run sees
   the very batches the killed one would have. With probability `relabel` a row is a
   random window of its trajectory, relabelled in hindsight with its own BD and rule
   description (`data.Relabeler`: never a held-out BD key or held-out instruction).
   Conditioning dropout: each row hides its
   instruction with probability `text_dropout` and, independently, its BD with
   probability `bd_dropout`, so one model acts from an instruction alone, a BD alone, or
   both (and a no-text model from a BD or from nothing). AdamW, linear warm-up then cosine decay to 10 % over the budget (steps,
   or `minutes` of training when that ends first), gradients clipped at 1.
4. Metrics every `eval_every` steps: `loss` (the mean training loss since the last
   log; what the console's job view plots), validation loss and action accuracy with
   both conditions, with the instruction only and with the BD only, lr, speed.
5. Checkpoints (artifact kind "dt", step = optimizer steps) every `checkpoint_every`
   steps, at the end, and on SIGTERM (the job's on_cancel hook); the last two of a
   run are kept. A checkpoint folder holds model.pt, optimizer.pt, config.json (the
   model config, step, training seconds) and tokenizer.json.
   Early stopping by model selection: every `select_every` steps the model acts
   closed-loop on the selection split (`select_metrics`: BD reached with instruction +
   BD, landmark order from the instruction alone); the best score so far is kept as
   artifact kind "dt-best" (model only). `dt eval` and the console load it by default.
   Longer training overfits the archive's few hundred elites (BD reached on unseen BDs
   falls), so the last step is not the best one.
6. Resume: `resume_from=RUN` continues the newest checkpoint of that run's lineage:
   the step count, the optimizer, the training time spent (a `minutes` budget counts
   the whole lineage) and the data split all carry on.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from lactchain.runs.checkpoints import seal
from lactchain.archive.dt.checkpoints import (  # noqa: F401  (re-exported: the names callers know)
    BEST_KIND,
    CHECKPOINT_KIND,
    CONFIG_FILE,
    KEEP_CHECKPOINTS,
    OPTIMIZER_FILE,
    keep_newest,
    load_checkpoint,
    read_tensors,
    save_checkpoint,
    text_side,
    text_tensors,
)
from lactchain.archive.dt.data import (  # noqa: F401  (archive_rows, Dataset and prepare re-exported)
    IGNORE,
    Dataset,
    Episode,
    Relabeler,
    SceneCodec,
    Tensors,
    archive_rows,
    prepare,
)
from lactchain.archive.dt.evaluate import Task, evaluate_model
from lactchain.archive.dt.model import NO_TEXT, DecisionTransformer, DTConfig, action_accuracy, action_loss
from lactchain.archive.dt.tokenizer import FrozenText, LearnedText
from lactchain.archive.dt.train_config import DTTrainConfig
from lactchain.runs.resume import latest_checkpoint

LENGTH_BUCKETS = 2  # length-sorted sub-batches per step (`bucketed_loss`): 1.9x the steps/s on CPU


def _resume_point(registry: Any, resume_from: str | None) -> dict[str, Any] | None:
    if not resume_from:
        return None
    source = registry.resolve_run_id(resume_from)
    art = latest_checkpoint(registry, source, CHECKPOINT_KIND)
    if art is None:
        raise FileNotFoundError(f"run {source} has no decision-transformer checkpoint to resume from")
    return art


# ---- 3-5. training ---------------------------------------------------------------------------------

def lr_at(progress: float, lr: float, warmup_fraction: float) -> float:
    """Linear warm-up, then cosine decay to 10 % of `lr` (progress in [0, 1])."""
    if progress < warmup_fraction:
        return lr * (progress / warmup_fraction)
    frac = (progress - warmup_fraction) / max(1e-9, 1 - warmup_fraction)
    return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))


@torch.no_grad()
def validation(model: DecisionTransformer, tensors: Tensors, text: dict[str, torch.Tensor],
               idx: Sequence[int]) -> dict[str, float]:
    """Teacher-forced loss and action accuracy on `idx`: both conditions, the instruction
    only, the BD only."""
    if not len(idx):
        return {}
    model.eval()
    batch = {**tensors.batch(idx), **{k: v[list(idx)] for k, v in text.items()}}
    on, off = torch.ones(len(idx), dtype=torch.bool), torch.zeros(len(idx), dtype=torch.bool)
    out = {}
    for name, text_on, bd_on in (("", on, on), ("_text", on, off), ("_bd", off, on)):
        logits = model(batch, text_on=text_on, bd_on=bd_on)
        out[f"val{name}_loss"] = float(action_loss(logits, batch["act"]))
        out[f"val{name}_accuracy"] = action_accuracy(logits, batch["act"])
    model.train()
    return out


def bucketed_loss(model: DecisionTransformer, codec: SceneCodec, text: Any, eps: Sequence[Episode],
                  text_on: torch.Tensor, bd_on: torch.Tensor, buckets: int = LENGTH_BUCKETS) -> torch.Tensor:
    """The batch's mean action loss over its valid steps, computed on `buckets`
    length-sorted sub-batches, each padded only to its own longest episode: the archive
    mixes 2-move and 40-move walks, and padding the whole batch to the longest costs
    about twice the compute. Loss and gradient are the batch's, whatever the buckets.
    The graph of each bucket is kept until the caller's backward."""
    order = np.argsort([e.steps for e in eps], kind="stable")
    total, count = None, 0
    for part in np.array_split(order, max(1, min(buckets, len(order)))):
        sub = [eps[i] for i in part]
        batch = {**Tensors(sub, codec).batch(range(len(sub))), **text_tensors(text, [e.text for e in sub])}
        rows = torch.from_numpy(part)
        summed = action_loss(model(batch, text_on=text_on[rows], bd_on=bd_on[rows]), batch["act"], reduction="sum")
        total = summed if total is None else total + summed
        count += int((batch["act"] != IGNORE).sum())
    return total / max(count, 1)


def select_metrics(model: DecisionTransformer, text: Any, episodes: Sequence[Episode]) -> dict[str, float]:
    """Closed-loop on the model-selection trajectories: `select_bd_reached` (instruction +
    BD; the BD alone for a no-text model), `select_order_match` (the instruction alone)
    and `select_score`, their mean (what picks the best checkpoint)."""
    if not episodes:
        return {}
    tasks = [Task.of(e) for e in episodes]
    modes = ("text+bd", "text") if model.cfg.use_text else ("bd",)
    rates = evaluate_model(model, text, tasks, [False] * len(tasks), modes)
    model.train()
    out = {"select_bd_reached": rates[modes[0]]["bd_reached"]}
    if model.cfg.use_text:
        out["select_order_match"] = rates["text"]["order_match"]
    out["select_score"] = float(np.mean(list(out.values())))
    return out


@dataclass
class _Start:
    """Where a run starts: a fresh model, or the newest checkpoint of `resume_from`'s lineage."""

    model: DecisionTransformer
    text: Any  # the text side (`text_side`): LearnedText, FrozenText or None
    data: Dataset
    select_fraction: float  # the split carries on from the checkpoint
    path: str | None = None  # the checkpoint resumed from
    done: int = 0  # optimizer steps already taken
    spent: float = 0.0  # training seconds already spent (a `minutes` budget counts the lineage)
    best_score: float | None = None


def _start(c: DTTrainConfig, registry: Any, archive_id: str, rows: Any) -> _Start:
    """The model, text side and data split a run trains: fresh from `c`, or as the
    checkpoint it resumes left them (ValueError: one trained on another archive)."""
    start = _resume_point(registry, c.resume_from)
    if start is not None:
        model, text, meta = load_checkpoint(start["path"])
        if meta.get("archive") != archive_id:
            raise ValueError(f"checkpoint {start['path']} was trained on archive {meta.get('archive')}, "
                             f"not {archive_id}")
        select_fraction = float(meta.get("select_fraction", 0.0))
        data = prepare(rows, describer=c.describer, max_visits=model.cfg.max_visits, bd_to_go=model.cfg.bd_to_go,
                       val_fraction=c.val_fraction, seed=c.seed, select_fraction=select_fraction)
        return _Start(model, text, data, select_fraction, path=start["path"], done=int(meta.get("step", 0)),
                      spent=float(meta.get("train_seconds", 0.0)), best_score=meta.get("best_select_score"))
    data = prepare(rows, describer=c.describer, max_visits=c.max_visits, bd_to_go=c.bd_to_go,
                   val_fraction=c.val_fraction, seed=c.seed, select_fraction=c.select_fraction)
    text = text_side(c.text_encoder, data.texts(data.train))
    longest_train = max(data.episodes[i].steps for i in data.train)
    cfg = DTConfig(scene=data.codec.scene.as_dict(), n_layer=c.n_layer, n_head=c.n_head, n_embd=c.n_embd,
                   dropout=c.dropout, text_encoder=c.text_encoder, max_visits=c.max_visits, rtg=c.rtg,
                   bd_to_go=c.bd_to_go, tie_actions=c.tie_actions, absolute_cells=c.absolute_cells,
                   max_steps=longest_train + 8,
                   text_vocab=getattr(text, "vocab_size", 0), text_len=getattr(text, "length", 1),
                   text_dim=text.dim if isinstance(text, FrozenText) else 0)
    return _Start(DecisionTransformer(cfg), text, data, c.select_fraction)


def _optimizer(model: DecisionTransformer, c: DTTrainConfig, resumed: str | None) -> torch.optim.Optimizer:
    """AdamW, weight decay on the matrices only; a resumed run's state loaded back."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": c.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=c.lr, betas=(0.9, 0.95))
    if resumed is not None and (Path(resumed) / OPTIMIZER_FILE).is_file():
        optimizer.load_state_dict(read_tensors(Path(resumed) / OPTIMIZER_FILE))
    return optimizer


def _tokenizer_stats(text: Any, data: Dataset) -> dict[str, Any]:
    """How the instructions tokenise (saved with every checkpoint): the training ones, and
    for a learned vocabulary also the held-out ones (their longest, and how many it cuts)."""
    if text is None:
        return {"text_encoder": NO_TEXT}
    stats = text.stats(data.texts(data.train))
    if isinstance(text, LearnedText):
        val_stats = text.stats(data.texts(data.val))
        stats["longest_description_tokens_all"] = max(stats["longest_description_tokens"],
                                                      val_stats["longest_description_tokens"])
        stats["cut_val_descriptions"] = val_stats["cut_descriptions"]
    return stats


class _Saver:
    """A run's checkpoints (kind "dt": the newest KEEP_CHECKPOINTS, every `checkpoint_every`
    steps, at the end and on SIGTERM) and its best model by selection score ("dt-best"),
    with the training seconds of the whole lineage."""

    def __init__(self, handle: Any, start: _Start, optimizer: torch.optim.Optimizer, tokenizer: dict[str, Any],
                 split_meta: dict[str, Any]) -> None:
        self.handle, self.model, self.text, self.optimizer = handle, start.model, start.text, optimizer
        self.tokenizer, self.split_meta = tokenizer, split_meta
        self.step = start.done
        self.saved_step = start.done if start.path else -1
        self.last_path = start.path
        self.spent, self.since = start.spent, time.perf_counter()
        self.best, self.best_step, self.best_metrics = start.best_score, None, {}

    def seconds(self) -> float:
        return self.spent + (time.perf_counter() - self.since)

    def checkpoint(self, complete: bool) -> Path:
        step, registry = self.step, self.handle.registry
        folder = save_checkpoint(Path(self.handle.dir) / "dt" / f"step-{step:06d}", self.model, self.text,
                                 self.optimizer, step=step, train_seconds=self.seconds(), complete=complete,
                                 tokenizer=self.tokenizer, best_select_score=self.best, **self.split_meta)
        seal(folder)  # last: resume passes over a checkpoint whose files no longer match
        registry.add_artifact(self.handle.run_id, CHECKPOINT_KIND, folder, step=step,
                              meta={"step": step, "complete": complete, "train_seconds": self.seconds()})
        self.saved_step, self.last_path = step, str(folder)
        keep_newest(registry, self.handle.run_id, CHECKPOINT_KIND, KEEP_CHECKPOINTS)
        return folder

    def unsaved(self) -> bool:
        return self.step != self.saved_step

    def on_cancel(self) -> None:
        if self.unsaved():
            self.checkpoint(complete=False)

    def keep_best(self, scores: dict[str, float]) -> None:
        """A new best selection score: its model becomes the run's "dt-best" artifact."""
        step, registry = self.step, self.handle.registry
        self.best, self.best_step, self.best_metrics = scores["select_score"], step, scores
        folder = save_checkpoint(Path(self.handle.dir) / "dt" / f"best-step-{step:06d}", self.model, self.text,
                                 step=step, train_seconds=self.seconds(), tokenizer=self.tokenizer,
                                 best_select_score=self.best, **scores, **self.split_meta)
        seal(folder)
        registry.add_artifact(self.handle.run_id, BEST_KIND, folder, step=step, meta={"step": step, **scores})
        keep_newest(registry, self.handle.run_id, BEST_KIND, 1)


def _batch(c: DTTrainConfig, data: Dataset, relabeler: Relabeler, train_idx: np.ndarray,
           rng: np.random.Generator) -> tuple[list[Episode], torch.Tensor, torch.Tensor]:
    """One step's rows (some relabelled in hindsight) and which of them see their
    instruction and their BD (conditioning dropout)."""
    idx = rng.choice(train_idx, size=c.batch_size, replace=len(train_idx) < c.batch_size)
    if c.relabel > 0:
        eps = [relabeler.sample(data.episodes[i], rng) if rng.random() < c.relabel else data.episodes[i] for i in idx]
    else:
        eps = [data.episodes[i] for i in idx]
    described = torch.tensor([bool(e.text) for e in eps])
    text_on = torch.from_numpy(rng.random(c.batch_size) >= c.text_dropout) & described
    bd_on = torch.from_numpy(rng.random(c.batch_size) >= c.bd_dropout)
    return eps, text_on, bd_on


def train_dt(
    handle: Any,
    config: DTTrainConfig,
    *,
    on_log: Callable[[int, dict[str, float]], None] | None = None,
    on_step: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Train a decision transformer on an archive run's trajectories (see the module doc).

    `handle` is a `lactchain.jobs.RunHandle`; `config` is the run's recorded params.
    `config.text_encoder`: "learned", a frozen sentence encoder spec ("minilm-l6") or
    "none" (the no-text baseline).
    """
    c = config
    t_start = time.perf_counter()
    if c.threads:
        torch.set_num_threads(int(c.threads))
    torch.manual_seed(c.seed)
    archive_id, rows = archive_rows(handle.registry, c.archive)
    start = _start(c, handle.registry, archive_id, rows)
    model, text, data = start.model, start.text, start.data
    model.train()
    tensors = Tensors(data.episodes, data.codec)
    texts = text_tensors(text, [e.text for e in data.episodes])
    optimizer = _optimizer(model, c, start.path)
    tok_stats = _tokenizer_stats(text, data)
    saver = _Saver(handle, start, optimizer, tok_stats,
                   {"archive": archive_id, "describer": c.describer, "seed": c.seed, "val_fraction": c.val_fraction,
                    "select_fraction": start.select_fraction})
    handle.on_cancel(saver.on_cancel)

    budget_s = c.minutes * 60.0 if c.minutes else None
    train_idx = np.asarray(data.train)
    held = data.val + data.select  # never relabelled into training
    relabeler = Relabeler(data.codec, c.describer, model.cfg.bd_to_go, {data.episodes[i].key for i in held},
                          set(data.texts(held)) - set(data.texts(data.train)))
    select_eps = [data.episodes[i] for i in data.select]
    metrics: dict[str, float] = {}
    losses: list[float] = []
    t_log, steps_at_log = time.perf_counter(), saver.step
    while saver.step < c.steps and (budget_s is None or saver.seconds() < budget_s):
        handle.check_cancelled()
        step = saver.step
        rng = np.random.default_rng([c.seed, step])  # a resumed run sees the batches the killed one would have
        eps, text_on, bd_on = _batch(c, data, relabeler, train_idx, rng)
        progress = step / c.steps if budget_s is None else max(step / c.steps, saver.seconds() / budget_s)
        for group in optimizer.param_groups:
            group["lr"] = lr_at(progress, c.lr, c.warmup)
        optimizer.zero_grad(set_to_none=True)
        loss = bucketed_loss(model, data.codec, text, eps, text_on, bd_on)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        saver.step = step = step + 1
        losses.append(loss.item())
        if on_step is not None:
            on_step(step)
        last = step >= c.steps or (budget_s is not None and saver.seconds() >= budget_s)
        if step % c.eval_every == 0 or last:
            now = time.perf_counter()
            metrics = {"loss": float(np.mean(losses)), "lr": optimizer.param_groups[0]["lr"],
                       **validation(model, tensors, texts, data.val),
                       "train_seconds": saver.seconds(), "steps_per_s": (step - steps_at_log) / max(now - t_log, 1e-9)}
            handle.log_metrics(metrics, step=step)
            losses, t_log, steps_at_log = [], now, step
            if on_log is not None:
                on_log(step, metrics)
        if select_eps and (step % c.select_every == 0 or last):
            scores = select_metrics(model, text, select_eps)
            if saver.best is None or scores["select_score"] > saver.best:
                saver.keep_best(scores)
            handle.log_metrics({**scores, "select_best": saver.best}, step=step)
            metrics.update(scores)
        if step % c.checkpoint_every == 0 and not last:
            saver.checkpoint(complete=True)
    if saver.unsaved():
        saver.checkpoint(complete=True)

    return {
        "archive": archive_id,
        "describer": c.describer,
        "text_encoder": model.cfg.text_encoder,
        "trajectories": len(data.episodes),
        "undescribed": data.undescribed,
        "train_trajectories": len(data.train),
        "val_trajectories": len(data.val),
        "select_trajectories": len(data.select),
        "best": {"step": saver.best_step, **saver.best_metrics} if saver.best_step is not None else None,
        "tokenizer": tok_stats,
        "parameters": model.num_params(),
        "config": {k: v for k, v in model.cfg.as_dict().items() if k != "scene"},
        "start_step": start.done,
        "steps": saver.step,
        "train_seconds": saver.seconds(),
        "metrics": metrics,
        "checkpoint": saver.last_path,
        "seconds": time.perf_counter() - t_start,
    }
