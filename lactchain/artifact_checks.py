"""Saved artifacts checked before a run that loads them exists: LoRA adapters, critic
checkpoints, trainer checkpoints (adapter + optimizer, scheduler, rng and trainer state),
reward models, decision-transformer checkpoints. A broken file (truncated, zero bytes, a
garbled header, tensors of the wrong shape, a pickle where plain tensors belong, a
metadata file full of garbage, a sealed checkpoint whose files changed) is one ValueError
line naming the file and what to do, never a traceback from deep inside safetensors, torch
or peft, and never a run left FAILED.

Each kind's own loader holds its checks (`models.critic.check_saved`,
`train.reward_model.check_saved`, `archive.dt.checkpoints.check_checkpoint`), all reading
through `lactchain.runs.files`; this module is the one place the jobs call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lactchain.runs.checkpoints import whole
from lactchain.runs.files import RETRAIN, read_json_object, read_tensors

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_META = "lactchain_adapter.json"
TRAINER_STATE = "trainer_state.json"


def check_adapter(folder: str | Path, base: str | None = None) -> dict[str, Any]:
    """A LoRA adapter folder that will load: its config, its weights' header and shapes
    (rank `r` on every lora_A/lora_B pair), its lab metadata when present, and (given
    `base`) that it was trained on that base model. Returns the lab metadata ({} if none)."""
    folder = Path(folder)
    config = read_json_object(folder / ADAPTER_CONFIG, "adapter")
    if config.get("peft_type", "LORA") != "LORA":
        raise ValueError(f"adapter {folder}: {ADAPTER_CONFIG} says peft_type {config.get('peft_type')!r}; the lab "
                         f"trains and loads LORA adapters only; {RETRAIN}")
    rank = config.get("r")
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        raise ValueError(f"adapter {folder}: {ADAPTER_CONFIG} has no valid rank r (got {rank!r}); {RETRAIN}")
    weights = folder / ADAPTER_WEIGHTS
    if not weights.is_file() or weights.stat().st_size == 0:
        raise ValueError(f"adapter {folder}: {ADAPTER_WEIGHTS} is {'empty' if weights.is_file() else 'missing'}; "
                         f"{RETRAIN}")
    shapes = _safetensors_shapes(weights, folder)
    if not any("lora_" in name for name in shapes):
        raise ValueError(f"adapter {folder}: {ADAPTER_WEIGHTS} holds no LoRA weights; {RETRAIN}")
    for name, shape in shapes.items():
        bad = len(shape) != 2 or ("lora_A" in name and shape[0] != rank) or ("lora_B" in name and shape[1] != rank)
        if "lora_" in name and bad:
            raise ValueError(f"adapter {folder}: tensor {name} has shape {list(shape)}, not a rank-{rank} LoRA "
                             f"factor; {RETRAIN}")
    meta: dict[str, Any] = {}
    if (folder / ADAPTER_META).exists():
        meta = read_json_object(folder / ADAPTER_META, "adapter")
        for key, kind in (("base", str), ("loss", str), ("step", int), ("lora_r", int)):
            if key in meta and meta[key] is not None and not isinstance(meta[key], kind):
                raise ValueError(f"adapter {folder}: {ADAPTER_META} field {key!r} is {meta[key]!r}, not a "
                                 f"{kind.__name__}; {RETRAIN}")
        if isinstance(meta.get("lora_r"), int) and meta["lora_r"] != rank:
            raise ValueError(f"adapter {folder}: {ADAPTER_META} says rank {meta['lora_r']}, {ADAPTER_CONFIG} says "
                             f"{rank}; {RETRAIN}")
    trained_on = meta.get("base")
    if base and trained_on and str(trained_on) != str(base) and _both_presets(str(trained_on), str(base)):
        raise ValueError(f"adapter {folder} was trained on {trained_on}, not {base}: use --actor {trained_on} "
                         "(or an adapter trained on this actor)")
    return meta


def _both_presets(a: str, b: str) -> bool:
    """Two model names the lab knows as presets (a local path may be the same model)."""
    from lactchain.models.presets import PRESETS

    return a in PRESETS and b in PRESETS


def _safetensors_shapes(path: Path, folder: Path) -> dict[str, tuple[int, ...]]:
    """Tensor shapes from a safetensors header, checked against the file's size."""
    import struct

    try:
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ValueError
            (length,) = struct.unpack("<Q", head)
            if length > min(path.stat().st_size - 8, 100_000_000):
                raise ValueError
            header = json.loads(f.read(length))
        data_end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
        if 8 + length + data_end > path.stat().st_size:
            raise ValueError("truncated")
        return {k: tuple(int(d) for d in v["shape"]) for k, v in header.items() if k != "__metadata__"}
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError, OSError) as exc:
        why = "truncated" if str(exc) == "truncated" else "not a readable safetensors file"
        raise ValueError(f"adapter {folder}: {ADAPTER_WEIGHTS} is {why}; {RETRAIN}") from None


def check_critic_checkpoint(folder: str | Path, resume: bool = False) -> None:
    """A critic checkpoint that will load: whole (its manifest matches), critic.json,
    heads.pt as plain tensors of the backbone's width (a pickle of anything else is
    refused, never run), its LoRA adapter, and (to resume from it) its optimizer state."""
    from lactchain.models.critic import ADAPTER_DIR, check_saved

    folder = Path(folder)
    whole(folder, "critic checkpoint")
    check_saved(folder)
    check_adapter(folder / ADAPTER_DIR)
    if resume and (folder / "optimizer.pt").exists():
        read_tensors(folder / "optimizer.pt", "critic checkpoint")


def check_trainer_checkpoint(folder: str | Path) -> None:
    """An actor trainer checkpoint a resume can start from: whole, its adapter, its
    trainer_state.json, and the optimizer, scheduler and rng state as plain data
    (`weights_only`, numpy's rng state allowed as transformers allows it)."""
    from transformers.trainer_pt_utils import safe_globals

    folder = Path(folder)
    what = "checkpoint"
    whole(folder, what)
    check_adapter(folder)
    read_json_object(folder / TRAINER_STATE, what)
    for path in sorted(folder.glob("*.pt")) + sorted(folder.glob("rng_state*.pth")):
        read_tensors(path, what, allowing=safe_globals)


def check_reward_model(folder: str | Path) -> None:
    """A reward model that will load (`train.reward_model.check_saved`)."""
    from lactchain.train.reward_model import check_saved

    check_saved(folder)
