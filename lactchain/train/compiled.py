"""torch.compile for the actor's training step, where it pays.

Why: on a GPU a small model's training step is bound by the host, not the card. On one
H200 a CPO-SimPO step on 8 pairs of SmolLM2-135M took 0.245 s (whole rows) for work the
card does in a few ms: thousands of small kernels launched one by one from Python, LoRA's
extra matmuls on every projection included (`bench device`, 2026-11-30,
docs/results/gpu-h200-2026-11-30). Compiling the model fuses those ops into few kernels.
The cost is the compile itself (tens of seconds for 30 layers, again for a new shape until
dynamo marks the lengths dynamic), so it pays only where steps are many and cheap to fuse.

The TRL trainers (CPO-SimPO, DPO, KTO) compile through their own `torch_compile` setting
(accelerate's dynamo plugin); rft's own loop compiles the model it calls. GRPO samples
from the model it trains, between steps, and stays uncompiled. `COMPILE_PAYS` says where
`TrainActorConfig.torch_compile=None` compiles, by device type, as measured.
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

# Where compiling the training step pays, by device type (`torch_compile=None` follows this;
# measured by `bench device --compiled`, `compiled_speedup`). On one H200 (2026-11-30,
# docs/results/gpu-h200-2026-11-30b) a step got 1.25x (CPO-SimPO, 0.178 -> 0.142 s) and
# 1.93x (rft, 0.199 -> 0.103 s) faster, but the compile took ~100 s, against ~9 s saved
# over a loop iteration's 240 CPO-SimPO steps: off. A CPU is bound by FLOPs and compiles
# slowly (~50 s for the tiny actor on 2 cores): off.
COMPILE_PAYS = {"cpu": False, "cuda": False}
# inductor generates fused kernels (Triton on a GPU, C++ on a CPU); tests use "aot_eager",
# which traces and runs the same graphs without generating code.
COMPILE_BACKEND = "inductor"


def compile_unavailable(device_type: str) -> str | None:
    """Why inductor cannot compile on `device_type` here (a one-line reason naming the fix),
    or None. Checked before a run exists: inductor would otherwise fail at the first step."""
    import importlib.util
    import shutil

    if COMPILE_BACKEND != "inductor":
        return None
    if device_type == "cuda":
        return None if importlib.util.find_spec("triton") else "triton is not installed (pip install triton)"
    if not any(shutil.which(c) for c in ("g++", "c++", "clang++")):
        return "inductor needs a C++ compiler on a CPU and none is on PATH (install g++)"
    return None


def compiles(model: Any, asked: bool | None) -> bool:
    """Whether a trainer compiles `model`'s training forward: as `asked`, else where that
    pays on the device its weights are on (`COMPILE_PAYS`). Asked where it cannot: ValueError."""
    device_type = next(model.parameters()).device.type
    if asked is None:
        return COMPILE_PAYS.get(device_type, False)
    if asked and (why := compile_unavailable(device_type)):
        raise ValueError(f"torch_compile: {why}; or leave compiling off")
    return bool(asked)


def trl_compile_kwargs(on: bool) -> dict[str, Any]:
    """A TRL config's kwargs for compiling (or not) the model it trains."""
    return {"torch_compile": True, "torch_compile_backend": COMPILE_BACKEND} if on else {"torch_compile": False}


def compiled_model(model: Any, on: bool) -> Any:
    """`model` compiled for rft's own loop (the same parameters, a fused forward), or as is.
    Shapes start static; dynamo marks the lengths dynamic at the first new batch width."""
    if not on:
        return model
    import torch

    return torch.compile(model, backend=COMPILE_BACKEND)


def step_timing(step_times: Sequence[float]) -> dict[str, float | None]:
    """A training run's step seconds as every trainer reports them: the first step apart (it
    pays one-off costs, a compile among them), the mean and median of the rest."""
    timed = list(step_times[1:] or step_times)
    return {"first_step_s": step_times[0] if step_times else None,
            "median_step_s": statistics.median(timed) if timed else None,
            "s_per_step": sum(timed) / len(timed) if timed else None}
