"""What machine (and which code) a benchmark ran on, recorded beside its numbers.

Wall-clock results only compare on like hardware, and "a 2-core CPU" is not one kind:
whether it has native bf16 (AMX, AVX512-bf16) decides whether bf16 generation is faster
or slower than float32 (`fast_generation_dtype`, the loop's default). So
every benchmark result says which CPU (and GPU) it ran on, the way pytest-benchmark
records machine_info."""

from __future__ import annotations

import os
import platform
from functools import lru_cache
from pathlib import Path
from typing import Any

BF16_FLAGS = ("amx_bf16", "avx512_bf16")  # /proc/cpuinfo flags of native bf16 matrix math


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo ({} where there is none: macOS, Windows)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    fields: dict[str, str] = {}
    for line in text.split("\n\n")[0].splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    return fields


def _bf16_flags(info: dict[str, str]) -> list[str]:
    return sorted(set(BF16_FLAGS) & set(info.get("flags", "").split()))


@lru_cache(maxsize=1)
def cpu_has_bf16() -> bool:
    """Whether this CPU does bf16 matrix math natively (else torch emulates it).
    LACTCHAIN_CPU_BF16=0 answers no: fp32 defaults everywhere, so a run's arithmetic is
    the same on CPUs with and without it (and in the job processes, which inherit it)."""
    if os.environ.get("LACTCHAIN_CPU_BF16", "").strip() == "0":
        return False
    return bool(_bf16_flags(_cpuinfo()))


OMP_POLICY_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
SHORT_SPIN = "10000"  # GOMP_SPINCOUNT: ~0.1 ms of spinning at a barrier, then sleep
SHORT_BLOCKTIME_MS = "1"  # KMP_BLOCKTIME, the same idea for LLVM's and Intel's OpenMP


def calm_omp_threads() -> None:
    """Let torch's OpenMP threads spin ~0.1 ms at a barrier before they sleep, instead of
    libgomp's ~3 ms, unless the user chose (OMP_WAIT_POLICY or GOMP_SPINCOUNT set). A lab
    runs a detached job beside the console or another command: long-spinning threads take
    the cores the other process needs and both slow down many times over. Measured on 2
    cores (scripts/omp_wait_check.py; docs/performance.md): a greedy evaluation beside a
    training process took 2.5x less time than with libgomp's spin, as fast as before
    alone; sleeping at once (OMP_WAIT_POLICY=PASSIVE) was faster still beside a job but
    16 % slower alone. Read by libgomp when torch loads, so the entry points call it
    first; child processes inherit it."""
    if not any(name in os.environ for name in OMP_POLICY_VARS):
        os.environ["GOMP_SPINCOUNT"] = SHORT_SPIN
    # torch builds on LLVM's or Intel's OpenMP (macOS wheels, conda with MKL) ignore GOMP_*;
    # theirs spin 200 ms by default. 1 ms there (not measured here: this machine's torch is GNU's).
    if not any(name in os.environ for name in ("OMP_WAIT_POLICY", "KMP_BLOCKTIME")):
        os.environ["KMP_BLOCKTIME"] = SHORT_BLOCKTIME_MS


def omp_wait_policy() -> str:
    """How this process's OpenMP threads wait, as set: 'PASSIVE', 'GOMP_SPINCOUNT=N' (GNU's
    libgomp), 'KMP_BLOCKTIME=N' (LLVM's and Intel's OpenMP), both, or 'default' (libgomp
    spins ~3 ms, then sleeps)."""
    if os.environ.get("OMP_WAIT_POLICY"):
        return os.environ["OMP_WAIT_POLICY"]
    set_ = [f"{name}={os.environ[name]}" for name in ("GOMP_SPINCOUNT", "KMP_BLOCKTIME") if os.environ.get(name)]
    return ", ".join(set_) or "default"


def machine_info() -> dict[str, Any]:
    """CPU model, cores, native bf16, torch threads (and how they wait) and version, the GPU if any."""
    import torch

    info = _cpuinfo()
    kind = f"family {info['cpu family']} model {info['model']}" if "cpu family" in info and "model" in info else None
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"cpu": info.get("model name") or platform.processor() or platform.machine(), "cpu_kind": kind,
            "cores": os.cpu_count(), "cpu_bf16": _bf16_flags(info), "torch_threads": torch.get_num_threads(),
            "omp_wait": omp_wait_policy(), "torch": torch.__version__, "gpu": gpu}


def fast_generation_dtype() -> str:
    """bfloat16 where bf16 is native (a CUDA GPU that has it, a CPU with AMX or
    AVX512-bf16), else float32: `bench rollout --envs 64` measured bf16 at 0.67x of
    float32 on a CPU without it (3.99 vs 5.92 env steps/s), 1.6x on one with it."""
    return "bfloat16" if native_bf16_here() else "float32"


def device_type_here() -> str:
    """Where this process computes by default: "cuda" if there is a GPU, else "cpu"."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def native_bf16_here() -> bool:
    """Whether bf16 is native where this process computes (the CUDA GPU if there is one,
    else the CPU): the default of bf16 generation and of the loop's bf16 training."""
    return native_bf16(device_type_here())


def native_bf16(device_type: str) -> bool:
    """Whether bf16 matrix math is native on this device type ("cuda" or "cpu"): the
    trainers' default for bf16 autocast. On the 2-core AVX512-bf16 CPU a CPO-SimPO step
    of SmolLM2 took 6.7 s with it against 15.6 s in fp32 (`lactchain bench device`); on a
    2-core CPU without it (AVX2 only) a tiny actor's forward + backward took 1.0 s under
    bf16 autocast against 0.19 s in fp32 (emulated bf16)."""
    import torch

    if device_type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False))
    return cpu_has_bf16()


DTYPE_NAMES = ("auto", "bfloat16", "float16", "float32")
DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


def resolve_dtype(value: str | None) -> str | None:
    """The canonical name of a generation dtype ("bf16", "torch.bfloat16" -> "bfloat16"),
    with the one meaning of `auto` anywhere in the lab (loop, play, evaluate, vLLM): the
    dtype this machine generates fastest in (`fast_generation_dtype`). None stays None
    (keep the loaded weights' dtype); an unknown name is a ValueError."""
    if value is None:
        return None
    key = str(value).lower().removeprefix("torch.")
    key = DTYPE_ALIASES.get(key, key)
    if key not in DTYPE_NAMES:
        raise ValueError(f"unknown dtype; use one of {', '.join(DTYPE_NAMES)}")
    return fast_generation_dtype() if key == "auto" else key


@lru_cache(maxsize=1)
def code_version() -> dict[str, Any]:
    """lactchain's version and, run from a git checkout, its commit and whether tracked
    files differ from it: the code a number came from (None where there is no git)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("lactchain")
    except PackageNotFoundError:
        release = None
    return {"lactchain": release, **git_state(Path(__file__).resolve().parent.parent)}


def git_state(root: str | Path) -> dict[str, Any]:
    """{commit, dirty} of the git checkout at `root` (None, None outside one). Read without
    git's optional locks: every job process asks, and a job killed (`runs kill` stops its
    process group) while `git status` refreshed the index left `.git/index.lock` behind,
    and the user's next `git commit` failed."""
    import subprocess

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "--no-optional-locks", "-C", str(root), *args], capture_output=True,
                                  text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "--short=12", "HEAD")
    changes = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"commit": commit, "dirty": bool(changes) if commit else None}


def code_tags() -> dict[str, str]:
    """`code_version` as run tags (`code.version`, `code.commit`, `code.dirty`), set by
    whichever process runs a job: `runs show` then names the code behind every run's
    numbers, not only a benchmark's cells. Unknown parts (no git) are left out."""
    code = code_version()
    found = {"code.version": code["lactchain"], "code.commit": code["commit"],
             "code.dirty": None if code["dirty"] is None else str(code["dirty"]).lower()}
    return {key: value for key, value in found.items() if value is not None}
