"""What a trainer needs to know when it runs as one of N processes (DDP under `accelerate
launch`): its rank, the world size, and one decision for all ranks. A stop (SIGTERM,
a budget's deadline) reaches each rank at its own moment; a rank that stops alone
would leave the others waiting in their next all-reduce, so every rank stops at the
step any of them asks to."""

from __future__ import annotations

import os


def world_size() -> int:
    """The processes of this training (WORLD_SIZE, set by the launcher); 1 alone."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def is_main_process() -> bool:
    """Rank 0, or a process training alone: the one that writes results and files."""
    return int(os.environ.get("RANK", "0") or 0) == 0


def visible_gpus() -> int:
    """CUDA GPUs this process may use (CUDA_VISIBLE_DEVICES applied); 0 on a CPU."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def gpus_short(processes: int, gpus: int) -> str | None:
    """Why `processes` ranks cannot train on `gpus` GPUs, or None. On a CUDA box the ranks
    talk over NCCL, which refuses two ranks on one GPU (accelerate puts rank i on GPU
    i % count), so each rank needs a GPU of its own; with no GPU they use gloo on the cores."""
    if gpus == 0 or processes <= gpus:
        return None
    return (f"{processes} processes need {processes} GPUs (NCCL runs one rank per GPU) and {gpus} "
            f"{'is' if gpus == 1 else 'are'} visible: give --processes {gpus}, or hide the GPUs "
            "(CUDA_VISIBLE_DEVICES=) to train on the CPU's cores")


def _on_collective_device(tensor):  # noqa: ANN001, ANN202 - a torch tensor
    """The tensor where the process group can reduce it: NCCL reduces CUDA tensors only
    (this rank's GPU), gloo CPU ones."""
    import torch
    import torch.distributed as dist

    if dist.get_backend() == "nccl":
        return tensor.to(torch.device("cuda", torch.cuda.current_device()))
    return tensor


def any_rank(*flags: bool) -> tuple[bool, ...]:
    """The flags OR-ed over every rank (an all-reduce); as given when training alone."""
    import torch.distributed as dist

    if world_size() == 1 or not (dist.is_available() and dist.is_initialized()):
        return tuple(bool(f) for f in flags)
    import torch

    votes = _on_collective_device(torch.tensor([int(bool(f)) for f in flags], dtype=torch.int64))
    dist.all_reduce(votes, op=dist.ReduceOp.MAX)
    return tuple(bool(v) for v in votes.tolist())


def rank() -> int:
    return int(os.environ.get("RANK", "0") or 0)


def sum_over_ranks(*values: float) -> tuple[float, ...]:
    """Each value summed over the ranks (e.g. loss totals, for the whole global batch)."""
    import torch.distributed as dist

    if world_size() == 1 or not (dist.is_available() and dist.is_initialized()):
        return tuple(float(v) for v in values)
    import torch

    t = _on_collective_device(torch.tensor([float(v) for v in values], dtype=torch.float64))
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return tuple(float(v) for v in t.tolist())


def same_start(params) -> None:  # noqa: ANN001 - an iterable of tensors
    """Every rank starts from rank 0's weights (what DDP's constructor does)."""
    import torch.distributed as dist

    if world_size() > 1 and dist.is_available() and dist.is_initialized():
        for p in params:
            dist.broadcast(p.data, src=0)


def average_gradients(params, share: float) -> None:  # noqa: ANN001
    """The global batch's mean gradient on every rank: each rank's gradient (the mean over
    its slice) weighted by its `share` of the batch, summed over the ranks."""
    import torch.distributed as dist

    if world_size() == 1 or not (dist.is_available() and dist.is_initialized()):
        return
    for p in params:
        if p.grad is not None:
            p.grad.mul_(share)
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
