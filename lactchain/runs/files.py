"""Reading the files a run leaves behind (checkpoint configs, tensor files, optimizer and
rng state): one way to read each, every failure an `ArtifactError` of one line naming the
file and the fix, never a traceback from deep inside json, torch or safetensors.

Each artifact kind's loader (the critic, the reward model, the decision transformer,
the trainer checkpoints, adapters) checks its files with these before a run that needs
them is created, and reads them with the same calls when it loads them, so what was
checked is what is loaded. Tensor files are read with `weights_only=True` always: a
pickle that wants to run code is refused, never run."""

from __future__ import annotations

import contextlib
import json
import pickle
import warnings
from pathlib import Path
from typing import Any, Callable, ContextManager, Mapping

RETRAIN = "train it again or point at another run"


class ArtifactError(ValueError):
    """A saved file that cannot be used, in one line: what it belongs to, which file, why, the fix."""


def refuse(what: str, path: Path, why: str, fix: str = RETRAIN) -> ArtifactError:
    """'critic checkpoint /runs/x/epoch-002: heads.safetensors is empty; train it again ...'."""
    return ArtifactError(f"{what} {Path(path).parent}: {Path(path).name} {why}; {fix}")


def read_json_object(path: Path, what: str, fix: str = RETRAIN) -> dict[str, Any]:
    """A JSON object from `path` (missing, unreadable, not JSON or not an object: refused)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise refuse(what, path, "is missing", fix) from None
    except (UnicodeDecodeError, json.JSONDecodeError, OSError) as exc:
        raise refuse(what, path, f"is not readable JSON ({type(exc).__name__})", fix) from None
    if not isinstance(data, dict):
        raise refuse(what, path, "is not a JSON object", fix)
    return data


def require_keys(data: Mapping[str, Any], path: Path, what: str, kinds: Mapping[str, Any],
                 fix: str = RETRAIN) -> None:
    """Every key of `kinds` present in `data` with a value of that type (a type or a tuple)."""
    for key, kind in kinds.items():
        value = data.get(key)
        kinds_ = kind if isinstance(kind, tuple) else (kind,)
        if key not in data or not isinstance(value, kinds_) or (isinstance(value, bool) and bool not in kinds_):
            got = "missing" if key not in data else f"{value!r}"[:40]
            raise refuse(what, path, f"has no valid {key!r} (got {got})", fix)


def read_tensors(path: Path, what: str, fix: str = RETRAIN, device: Any = "cpu",
                 allowing: Callable[[], ContextManager[Any]] = contextlib.nullcontext) -> Any:
    """A torch file of plain tensors (and containers, numbers, strings); `allowing` widens
    what may be unpickled (transformers' `safe_globals` for numpy's rng state)."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise refuse(what, path, "is missing", fix)
    if path.stat().st_size == 0:
        raise refuse(what, path, "is empty", fix)
    try:
        with warnings.catch_warnings(), allowing():
            warnings.simplefilter("ignore")  # torch's notes on foreign pickle protocols: the refusal says enough
            return torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError:
        raise refuse(what, path, "holds more than plain tensors (refused: loading it could run code)", fix) from None
    except Exception as exc:  # noqa: BLE001 - truncated zip, garbage, a directory: one line each
        raise refuse(what, path, f"is not readable ({type(exc).__name__}: truncated or altered?)", fix) from None


def tensor_dict(value: Any, path: Path, what: str, fix: str = RETRAIN) -> dict[str, Any]:
    """`value` as a flat {name: tensor} state dict, or refused."""
    import torch

    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                              for k, v in value.items()):
        raise refuse(what, path, "is not a state dict of tensors", fix)
    return value


def match_shapes(state: Mapping[str, Any], expected: Mapping[str, tuple[int, ...]], path: Path, what: str,
                 fix: str = RETRAIN, prefix: str = "", source: str = "the model") -> None:
    """The state dict's names and shapes are exactly those the model (as `source`
    describes it: 'config.json') expects."""
    missing = [k for k in expected if k not in state]
    extra = [k for k in state if k not in expected]
    if missing or extra:
        parts = ([f"lacks {prefix}{missing[0]}" + (f" (+{len(missing) - 1} more)" if len(missing) > 1 else "")]
                 if missing else []) + \
                ([f"has unexpected {prefix}{extra[0]}" + (f" (+{len(extra) - 1} more)" if len(extra) > 1 else "")]
                 if extra else [])
        raise refuse(what, path, f"{' and '.join(parts)}: not the weights of {source}", fix)
    for name, shape in expected.items():
        got = tuple(state[name].shape)
        if got != tuple(shape):
            raise refuse(what, path, f"tensor {prefix}{name} has shape {list(got)}, {source} needs {list(shape)}", fix)


def shapes_of(module: Any) -> dict[str, tuple[int, ...]]:
    """{name: shape} of a torch module's state dict (build it on the meta device: no memory)."""
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


def write_weights(path: Path, state: Mapping[str, Any]) -> None:
    """A flat {name: tensor} state as safetensors (CPU copies: tied weights saved apart)."""
    from safetensors.torch import save_file

    save_file({k: v.detach().to("cpu").clone().contiguous() for k, v in state.items()}, str(path))


def flat_state(value: Any, prefix: str = "") -> dict[str, Any]:
    """{"v_head": {"0.weight": t}} -> {"v_head.0.weight": t} (non-dict leaves kept as they are)."""
    if not isinstance(value, dict):
        return {prefix.rstrip("."): value}
    out: dict[str, Any] = {}
    for key, inner in value.items():
        out.update(flat_state(inner, f"{prefix}{key}.") if isinstance(inner, dict) else {f"{prefix}{key}": inner})
    return out


def weights_file(path: Path) -> Path:
    """The file `read_weights(path)` reads: NAME.safetensors, or NAME.pt of an older run."""
    path = Path(path)
    legacy = path.with_suffix(".pt")
    return legacy if not path.exists() and legacy.is_file() else path


def read_weights(path: Path, what: str, fix: str = RETRAIN) -> dict[str, Any]:
    """A flat {name: tensor} state from a safetensors file, or from the torch file of the
    same name that runs saved before safetensors (`NAME.pt`, read with weights_only)."""
    path = weights_file(path)
    if path.suffix == ".pt":
        return tensor_dict(flat_state(read_tensors(path, what, fix)), path, what, fix)
    if not path.is_file():
        raise refuse(what, path, "is missing", fix)
    if path.stat().st_size == 0:
        raise refuse(what, path, "is empty", fix)
    from safetensors.torch import load_file

    try:
        return load_file(str(path), device="cpu")
    except Exception as exc:  # noqa: BLE001 - SafetensorError, a garbled header, a pickle under this name
        raise refuse(what, path, f"is not readable safetensors ({type(exc).__name__}: truncated or altered?)",
                     fix) from None
