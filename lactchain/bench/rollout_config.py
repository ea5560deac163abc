"""What `bench rollout` runs (no torch here: the CLI and the job table import it at
start-up). The bench itself is `lactchain.bench.rollout`; the job, `lactchain.jobs.bench_rollout`."""

from __future__ import annotations

from dataclasses import dataclass

from lactchain.config import Config, option

ENGINES = ("hf", "vllm")


@dataclass
class RolloutBenchConfig(Config):
    """The actor, the batch, what is timed and which engines."""

    actor: str = option("smollm2-135m", "Actor preset, local folder or cached hub id.")
    envs: int = option(16, "Batch size: envs stepped in lock-step.", short="-b", min=1, max=4096)
    steps: int = option(4, "Lock-steps to time in each mode.", short="-k", min=1, max=1000)
    constrained: bool = option(True, "Grammar-constrained move lists (default), or free text + lenient parsing.",
                               negative="--free")
    temperature: float = option(0.0, "Sampling temperature; 0 = greedy.", short="-t", min=0.0, max=100.0)
    seed: int = option(0, "Seed of the start states and the sampling.", min=0, max=2**32 - 1)
    bf16: bool = option(True, "Also time generation with a bfloat16 copy of the weights.", negative="--no-bf16")
    engines: str = option("hf", "Engines timed side by side, comma-separated: hf, vllm. 'hf' alone (the default) "
                                "gives the batched/sequential/ceiling report; with vllm: env-steps/s per engine and "
                                "setting (fp32/bf16, prefix cache on/off, with/without --adapter), one row each.")
    adapter: str | None = option(None, "Also time each engine with this LoRA adapter: a folder, a train-actor or "
                                       "pipeline run id, or 'random' (a rank-8 LoRA with random weights: speed only).")

    def check(self) -> None:
        names = [e.strip().lower() for e in self.engines.split(",") if e.strip()]
        if not names or any(e not in ENGINES for e in names):
            self.refuse("engines", f"use a comma-separated list of {', '.join(ENGINES)}")
        self.engines = ",".join(dict.fromkeys(names))

    @property
    def chosen(self) -> list[str]:
        return self.engines.split(",")

    @property
    def side_by_side(self) -> bool:
        """Rows per engine and setting (vllm or an adapter asked for), not the hf report."""
        return self.chosen != ["hf"] or self.adapter is not None
