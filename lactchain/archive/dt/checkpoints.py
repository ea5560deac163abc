"""Decision-transformer checkpoints: a folder with model.safetensors (model.pt before it),
optimizer.pt, config.json (the
model config, step, training seconds, the data split) and the text encoder's files.

Shared by training (`lactchain.archive.dt.train` writes them, resumes from them) and evaluation
(`lactchain.archive.dt.evaluate` loads a run's best or newest one).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Sequence

import torch

from lactchain.archive.dt.model import NO_TEXT, DecisionTransformer, DTConfig
from lactchain.archive.dt.tokenizer import LEARNED, TOKENIZER_FILE, FrozenText, LearnedText
from lactchain.runs.files import match_shapes, read_json_object, read_tensors as read_file, read_weights, refuse, \
    shapes_of, weights_file, write_weights

CHECKPOINT_KIND = "dt"
BEST_KIND = "dt-best"
KEEP_CHECKPOINTS = 2
MODEL_FILE, OPTIMIZER_FILE, CONFIG_FILE = "model.safetensors", "optimizer.pt", "config.json"


# ---- the text side ---------------------------------------------------------------------------

def text_side(spec: str, train_texts: Sequence[str], folder: Path | None = None, max_len: int = 0) -> Any:
    """The text encoder: learned (from a checkpoint folder, else on `train_texts`), frozen, or None."""
    if spec == NO_TEXT:
        return None
    if spec == LEARNED:
        return LearnedText.load(folder, max_len) if folder is not None else LearnedText.learn(train_texts)
    return FrozenText(spec)


def text_tensors(text: Any, texts: Sequence[str]) -> dict[str, torch.Tensor]:
    return {} if text is None else text.encode(list(texts))


# ---- checkpoints -----------------------------------------------------------------------------

def save_checkpoint(folder: Path, model: DecisionTransformer, text: Any, optimizer: Any = None,
                    **meta: Any) -> Path:
    """Write a checkpoint folder whole (a temporary folder renamed into place)."""
    from lactchain.paths import writing

    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with writing(folder, "the dt checkpoint"):
        tmp.mkdir(parents=True)
        write_weights(tmp / MODEL_FILE, model.state_dict())
        if optimizer is not None:
            torch.save(optimizer.state_dict(), tmp / OPTIMIZER_FILE)
        (tmp / CONFIG_FILE).write_text(json.dumps({"config": model.cfg.as_dict(), **meta}, indent=1))
        if text is not None:
            text.save(tmp)
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return folder


WHAT = "dt checkpoint"


def read_tensors(path: Path) -> Any:
    """A tensor file of a checkpoint, on the CPU (plain tensors only: never a pickle that runs code)."""
    return read_file(path, WHAT)


def check_checkpoint(folder: str | Path,
                     optimizer: bool = False) -> tuple[DTConfig, dict[str, Any], dict[str, torch.Tensor]]:
    """A checkpoint that will load (and, with `optimizer`, resume): config.json describes a
    model, its weights hold exactly that model's tensors, a learned tokenizer reads and has
    the config's vocabulary. One ArtifactError line naming the file otherwise.
    Returns (config, the checkpoint's meta, the weights read), so a load reads them once."""
    folder = Path(folder)
    meta = read_json_object(folder / CONFIG_FILE, WHAT)
    try:
        cfg = DTConfig.from_dict(meta["config"])
        with torch.device("meta"):
            expected = shapes_of(DecisionTransformer(cfg))
    except Exception as exc:  # noqa: BLE001 - a missing, mistyped or impossible field: one line
        raise refuse(WHAT, folder / CONFIG_FILE, f"does not describe a model ({type(exc).__name__}: "
                     f"{str(exc).splitlines()[0][:80] if str(exc) else 'no config'})") from None
    state = read_weights(folder / MODEL_FILE, WHAT)
    match_shapes(state, expected, weights_file(folder / MODEL_FILE), WHAT,
                 source=f"the model its {CONFIG_FILE} describes")
    if cfg.text_encoder == LEARNED:
        try:
            text = LearnedText.load(folder, cfg.text_len)
        except Exception as exc:  # noqa: BLE001 - garbage, truncated, missing
            raise refuse(WHAT, folder / TOKENIZER_FILE, f"is not a readable tokenizer ({type(exc).__name__})") \
                from None
        if text.vocab_size != cfg.text_vocab:
            raise refuse(WHAT, folder / TOKENIZER_FILE, f"has {text.vocab_size} words, the model was trained on "
                         f"{cfg.text_vocab}")
    if optimizer and (folder / OPTIMIZER_FILE).exists():
        read_tensors(folder / OPTIMIZER_FILE)
    return cfg, meta, state


def load_checkpoint(folder: str | Path) -> tuple[DecisionTransformer, Any, dict[str, Any]]:
    """(model in eval mode, its text encoder or None, the checkpoint's meta), checked first."""
    folder = Path(folder)
    if not (folder / CONFIG_FILE).is_file():
        raise FileNotFoundError(f"{folder} is not a decision-transformer checkpoint (no {CONFIG_FILE})")
    cfg, meta, state = check_checkpoint(folder)
    model = DecisionTransformer(cfg)
    model.load_state_dict(state)
    model.eval()
    return model, text_side(cfg.text_encoder, [], folder, cfg.text_len), meta


def keep_newest(registry: Any, run_id: str, kind: str, keep: int) -> None:
    """Delete all but the newest `keep` checkpoint folders of `kind`, and their rows."""
    for old in registry.artifacts(run_id, kind)[:-keep]:
        shutil.rmtree(old["path"], ignore_errors=True)
    registry.prune_artifacts(run_id, kind)
