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
    archive, describer, text_encoder, seed = c.archive, c.describer, c.text_encoder, c.seed
    steps, minutes, batch_size, lr, val_fraction = c.steps, c.minutes, c.batch_size, c.lr, c.val_fraction
    select_fraction, select_every, relabel = c.select_fraction, c.select_every, c.relabel
    text_dropout, bd_dropout, max_visits, bd_to_go = c.text_dropout, c.bd_dropout, c.max_visits, c.bd_to_go
    eval_every, checkpoint_every, threads = c.eval_every, c.checkpoint_every, c.threads
    t_start = time.perf_counter()
    registry = handle.registry
    if threads:
        torch.set_num_threads(int(threads))
    torch.manual_seed(seed)
    archive_id, rows = archive_rows(registry, archive)

    start = _resume_point(registry, c.resume_from)
    if start is not None:
        model, text, meta = load_checkpoint(start["path"])
        cfg = model.cfg
        if meta.get("archive") != archive_id:
            raise ValueError(f"checkpoint {start['path']} was trained on archive {meta.get('archive')}, "
                             f"not {archive_id}")
        select_fraction = float(meta.get("select_fraction", 0.0))  # the split carries on
        data = prepare(rows, describer=describer, max_visits=cfg.max_visits, bd_to_go=cfg.bd_to_go,
                       val_fraction=val_fraction, seed=seed, select_fraction=select_fraction)
        done, spent = int(meta.get("step", 0)), float(meta.get("train_seconds", 0.0))
        best_score = meta.get("best_select_score")
    else:
        data = prepare(rows, describer=describer, max_visits=max_visits, bd_to_go=bd_to_go,
                       val_fraction=val_fraction, seed=seed, select_fraction=select_fraction)
        text = text_side(text_encoder, data.texts(data.train))
        longest_train = max(data.episodes[i].steps for i in data.train)
        cfg = DTConfig(scene=data.codec.scene.as_dict(), n_layer=c.n_layer, n_head=c.n_head, n_embd=c.n_embd,
                       dropout=c.dropout, text_encoder=text_encoder, max_visits=max_visits, rtg=c.rtg,
                       bd_to_go=bd_to_go, tie_actions=c.tie_actions, absolute_cells=c.absolute_cells,
                       max_steps=longest_train + 8,
                       text_vocab=getattr(text, "vocab_size", 0), text_len=getattr(text, "length", 1),
                       text_dim=text.dim if isinstance(text, FrozenText) else 0)
        model = DecisionTransformer(cfg)
        done, spent, best_score = 0, 0.0, None
    model.train()

    tensors = Tensors(data.episodes, data.codec)
    texts = text_tensors(text, [e.text for e in data.episodes])
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": c.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95))
    if start is not None and (Path(start["path"]) / OPTIMIZER_FILE).is_file():
        optimizer.load_state_dict(read_tensors(Path(start["path"]) / OPTIMIZER_FILE))

    budget_s = minutes * 60.0 if minutes else None
    state = {"step": done, "saved_step": done if start else -1, "last_path": start["path"] if start else None,
             "seconds": spent, "since": time.perf_counter(), "best": best_score, "best_step": None,
             "best_metrics": {}}
    split_meta = {"archive": archive_id, "describer": describer, "seed": seed, "val_fraction": val_fraction,
                  "select_fraction": select_fraction}
    tok_stats = text.stats(data.texts(data.train)) if text is not None else {"text_encoder": NO_TEXT}
    if isinstance(text, LearnedText):  # how held-out instructions tokenise with the learned vocabulary
        val_stats = text.stats(data.texts(data.val))
        tok_stats["longest_description_tokens_all"] = max(tok_stats["longest_description_tokens"],
                                                          val_stats["longest_description_tokens"])
        tok_stats["cut_val_descriptions"] = val_stats["cut_descriptions"]

    def seconds() -> float:
        return state["seconds"] + (time.perf_counter() - state["since"])

    def checkpoint(complete: bool) -> Path:
        step = state["step"]
        folder = save_checkpoint(Path(handle.dir) / "dt" / f"step-{step:06d}", model, text, optimizer,
                                 step=step, train_seconds=seconds(), complete=complete, tokenizer=tok_stats,
                                 best_select_score=state["best"], **split_meta)
        seal(folder)  # last: resume passes over a checkpoint whose files no longer match
        registry.add_artifact(handle.run_id, CHECKPOINT_KIND, folder, step=step,
                              meta={"step": step, "complete": complete, "train_seconds": seconds()})
        state["saved_step"], state["last_path"] = step, str(folder)
        keep_newest(registry, handle.run_id, CHECKPOINT_KIND, KEEP_CHECKPOINTS)
        return folder

    def keep_best(step: int, scores: dict[str, float]) -> None:
        """A new best selection score: its model becomes the run's "dt-best" artifact."""
        state["best"], state["best_step"], state["best_metrics"] = scores["select_score"], step, scores
        folder = save_checkpoint(Path(handle.dir) / "dt" / f"best-step-{step:06d}", model, text, step=step,
                                 train_seconds=seconds(), tokenizer=tok_stats, best_select_score=state["best"],
                                 **scores, **split_meta)
        seal(folder)
        registry.add_artifact(handle.run_id, BEST_KIND, folder, step=step, meta={"step": step, **scores})
        keep_newest(registry, handle.run_id, BEST_KIND, 1)

    def on_cancel() -> None:
        if state["step"] != state["saved_step"]:
            checkpoint(complete=False)

    handle.on_cancel(on_cancel)

    train_idx = np.asarray(data.train)
    train_texts = set(data.texts(data.train))
    held = data.val + data.select  # never relabelled into training
    relabeler = Relabeler(data.codec, describer, cfg.bd_to_go, {data.episodes[i].key for i in held},
                          set(data.texts(held)) - train_texts)
    select_eps = [data.episodes[i] for i in data.select]
    metrics: dict[str, float] = {}
    losses: list[float] = []
    t_log, steps_at_log = time.perf_counter(), state["step"]
    while state["step"] < steps and (budget_s is None or seconds() < budget_s):
        handle.check_cancelled()
        step = state["step"]
        rng = np.random.default_rng([seed, step])
        idx = rng.choice(train_idx, size=batch_size, replace=len(train_idx) < batch_size)
        if relabel > 0:
            eps = [relabeler.sample(data.episodes[i], rng) if rng.random() < relabel else data.episodes[i] for i in idx]
        else:
            eps = [data.episodes[i] for i in idx]
        described = torch.tensor([bool(e.text) for e in eps])
        text_on = torch.from_numpy(rng.random(batch_size) >= text_dropout) & described
        bd_on = torch.from_numpy(rng.random(batch_size) >= bd_dropout)
        progress = step / steps if budget_s is None else max(step / steps, seconds() / budget_s)
        for group in optimizer.param_groups:
            group["lr"] = lr_at(progress, lr, c.warmup)
        optimizer.zero_grad(set_to_none=True)
        loss = bucketed_loss(model, data.codec, text, eps, text_on, bd_on)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        state["step"] = step = step + 1
        losses.append(loss.item())
        if on_step is not None:
            on_step(step)
        last = step >= steps or (budget_s is not None and seconds() >= budget_s)
        if step % eval_every == 0 or last:
            now = time.perf_counter()
            metrics = {"loss": float(np.mean(losses)), "lr": optimizer.param_groups[0]["lr"],
                       **validation(model, tensors, texts, data.val),
                       "train_seconds": seconds(), "steps_per_s": (step - steps_at_log) / max(now - t_log, 1e-9)}
            handle.log_metrics(metrics, step=step)
            losses, t_log, steps_at_log = [], now, step
            if on_log is not None:
                on_log(step, metrics)
        if select_eps and (step % select_every == 0 or last):
            scores = select_metrics(model, text, select_eps)
            if state["best"] is None or scores["select_score"] > state["best"]:
                keep_best(step, scores)
            handle.log_metrics({**scores, "select_best": state["best"]}, step=step)
            metrics.update(scores)
        if step % checkpoint_every == 0 and not last:
            checkpoint(complete=True)
    if state["step"] != state["saved_step"]:
        checkpoint(complete=True)

    return {
        "archive": archive_id,
        "describer": describer,
        "text_encoder": cfg.text_encoder,
        "trajectories": len(data.episodes),
        "undescribed": data.undescribed,
        "train_trajectories": len(data.train),
        "val_trajectories": len(data.val),
        "select_trajectories": len(data.select),
        "best": {"step": state["best_step"], **state["best_metrics"]} if state["best_step"] is not None else None,
        "tokenizer": tok_stats,
        "parameters": model.num_params(),
        "config": {k: v for k, v in cfg.as_dict().items() if k != "scene"},
        "start_step": done,
        "steps": state["step"],
        "train_seconds": seconds(),
        "metrics": metrics,
        "checkpoint": state["last_path"],
        "seconds": time.perf_counter() - t_start,
    }
