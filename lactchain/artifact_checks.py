"""Saved artifacts checked before a run that loads them exists: a LoRA adapter folder and a
critic checkpoint. A broken file (truncated, zero bytes, a garbled header, tensors of the
wrong shape, a pickle where plain tensors belong, a metadata file full of garbage) is one
ValueError line naming the file and what to do, never a traceback from deep inside
safetensors, torch or peft, and never a run left FAILED.

The checks read headers and small JSON files only; the weights are not loaded (the
critic's heads are: a few KB)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_META = "lactchain_adapter.json"
RETRAIN = "train it again or point at another run"


def _json_object(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{what} {path.parent}: {path.name} is missing; {RETRAIN}") from None
    except (UnicodeDecodeError, json.JSONDecodeError, OSError) as exc:
        raise ValueError(f"{what} {path.parent}: {path.name} is not readable JSON ({type(exc).__name__}); "
                         f"{RETRAIN}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{what} {path.parent}: {path.name} is not a JSON object; {RETRAIN}")
    return data


def check_adapter(folder: str | Path, base: str | None = None) -> dict[str, Any]:
    """A LoRA adapter folder that will load: its config, its weights' header and shapes
    (rank `r` on every lora_A/lora_B pair), its lab metadata when present, and (given
    `base`) that it was trained on that base model. Returns the lab metadata ({} if none)."""
    folder = Path(folder)
    config = _json_object(folder / ADAPTER_CONFIG, "adapter")
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
        meta = _json_object(folder / ADAPTER_META, "adapter")
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


def check_critic_checkpoint(folder: str | Path) -> None:
    """A critic checkpoint that will load: critic.json, heads.pt as plain tensors (a pickle
    of anything else is refused, never run), and its LoRA adapter when it has one."""
    import pickle
    import warnings

    import torch

    folder = Path(folder)
    _json_object(folder / "critic.json", "critic checkpoint")
    heads = folder / "heads.pt"
    if not heads.is_file() or heads.stat().st_size == 0:
        raise ValueError(f"critic checkpoint {folder}: heads.pt is {'empty' if heads.is_file() else 'missing'}; "
                         f"{RETRAIN}")
    try:
        with warnings.catch_warnings():  # torch's note on a foreign pickle protocol: the refusal says enough
            warnings.simplefilter("ignore")
            state = torch.load(heads, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise ValueError(f"critic checkpoint {folder}: heads.pt holds more than plain tensors (refused: loading it "
                         f"could run code); {RETRAIN}") from None
    except Exception as exc:  # noqa: BLE001 - truncated zip, garbage: one line either way
        raise ValueError(f"critic checkpoint {folder}: heads.pt is not readable ({type(exc).__name__}); "
                         f"{RETRAIN}") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in _flatten(state)):
        raise ValueError(f"critic checkpoint {folder}: heads.pt is not a state dict of tensors; {RETRAIN}")
    for sub in ("adapter", "lora"):
        if (folder / sub / ADAPTER_CONFIG).is_file():
            check_adapter(folder / sub)


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _flatten(v)]
    return [value]
