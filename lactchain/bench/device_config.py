"""What `bench device` runs (no torch here: the CLI and the job table import it at
start-up). The bench itself is `lactchain.bench.device`; the job, `lactchain.jobs.bench_device`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from lactchain.config import Config, option

PHASES = ("evaluate", "rollout", "critic_encode", "train_step", "grpo_step")
_DEVICE = re.compile(r"^(cpu|cuda(:\d+)?)$")


@dataclass
class DeviceBenchConfig(Config):
    """The models, the batch sizes, the phases and where a profile and the report go."""

    actor: str = option("smollm2-135m", "Actor preset, local folder or cached hub id.", short="-a")
    critic: str = option("minilm-l6", "Critic backbone: a preset (minilm-l6, tiny) or a folder.")
    device: str | None = option(None, "cuda, cuda:1 or cpu. Default: cuda when there is one, else cpu.")
    dtype: str = option("auto", "Generation dtype: auto (bfloat16 where this machine does it natively), bfloat16, "
                                "float32.", choices=("auto", "bfloat16", "float16", "float32"))
    envs: int = option(64, "Envs in lock-step in the rollout phase.", short="-b", min=1, max=4096)
    steps: int = option(3, "Lock-steps timed in the rollout phase.", short="-k", min=1, max=100)
    critic_texts: int = option(1024, "(state, move list) texts the critic scores.", min=1, max=1_000_000)
    eval_rounds: int = option(2, "Timed rounds of the evaluation and its variants (grammar engine, caches), and "
                                 "of the rollouts with the prefix cache on and off, after one warm-up of each, "
                                 "interleaved; the best of each kept.", min=1, max=20)
    train_steps: int = option(4, "CPO-SimPO and GRPO steps (the first is not timed).", min=2, max=1000)
    compiled: bool = option(False, "train_step: also time CPO-SimPO and rft with torch.compile (the device's row "
                                   "layout; the first step, the compile, reported apart as compiled_first_step_s). "
                                   "Off by default: a compile takes tens of seconds, minutes on a CPU.")
    phases: str = option(",".join(PHASES), f"Comma-separated, some of: {', '.join(PHASES)}.")
    profile: str | None = option(None, "Folder for a torch.profiler Chrome trace and an op table per phase.")
    save: str | None = option(None, "Also write the report to this folder as device-<card>-<date>.json (e.g. "
                                    "docs/results/engine).")
    seed: int = option(0, "Seed of the rollouts and the training steps.", cli=False)

    def check(self) -> None:
        chosen = tuple(p.strip() for p in self.phases.split(",") if p.strip())
        if not chosen or any(p not in PHASES for p in chosen):
            self.refuse("phases", f"use some of {', '.join(PHASES)}")
        self.phases = ",".join(chosen)
        if self.device is not None and not _DEVICE.match(self.device):
            self.refuse("device", "is not a device: use cpu or cuda[:N]")
        if self.compiled:  # inductor's own error would come at the first compiled step, mid-bench
            from lactchain.machine import device_type_here
            from lactchain.train.compiled import compile_unavailable

            if why := compile_unavailable((self.device or device_type_here()).split(":")[0]):
                self.refuse("compiled", f"cannot compile here: {why}")

    @property
    def chosen(self) -> tuple[str, ...]:
        return tuple(self.phases.split(","))
