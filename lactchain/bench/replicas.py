"""What replicas cost and give on this machine (`lactchain bench replicas`): one vLLM engine
in-process, the same engine as one Ray actor (the Ray transport's overhead per call),
and 2 replicas as Ray actors and as local worker processes (env-steps/s), timed
interleaved on the same 16 prompts, medians of warm calls. The answers of every engine
are checked equal (greedy), so the timings compare the same work.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

from lactchain.config import Config, option

OVERHEAD_TARGET_PCT = 10.0  # the Ray transport's cost per call, against one in-process engine


def grid_prompts(n: int, moves: Any) -> list[str]:
    """`n` prompts of distinct grid start states (one env step each)."""
    from lactchain.bench.common import grid_starts

    return grid_starts(moves)[0][:n]


def _local_cluster(cpus: int) -> tuple[str, Callable[[], None]]:
    """A one-node Ray cluster on this machine for the benchmark (the address, a stop)."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": cpus, "include_dashboard": False})

    def stop() -> None:
        import ray

        ray.shutdown()
        cluster.shutdown()

    return cluster.address, stop


SETUPS = ("in-process", "ray-1", "ray-2", "processes-2")


@dataclass
class ReplicasBenchConfig(Config):
    """`bench replicas`: the actor, the engine dtype, the set-ups timed and how often."""

    actor: str = option("smollm2-135m", "Actor preset, local folder or cached hub id.")
    ray_address: str | None = option(None, "A running Ray cluster (auto, HOST:PORT). Default: a one-node cluster "
                                           "started for the benchmark on this machine.")
    calls: int = option(5, "Timed calls per set-up (medians).", min=1, max=1000)
    prompts: int = option(16, "Prompts per generate call.", min=1, max=63)
    dtype: str = option("bfloat16", "Engine dtype.", choices=("bfloat16", "float32"))
    setups: str = option(",".join(SETUPS), f"Which to time, comma-separated: in-process (always), "
                                           f"{', '.join(SETUPS[1:])}.")

    def check(self) -> None:
        chosen = tuple(dict.fromkeys(["in-process", *(x.strip() for x in self.setups.split(",") if x.strip())]))
        unknown = [x for x in chosen if x not in SETUPS]
        if unknown:
            self.refuse("setups", f"unknown {', '.join(unknown)}; use some of {', '.join(SETUPS)}")
        self.setups = ",".join(chosen)

    @property
    def chosen(self) -> tuple[str, ...]:
        return tuple(self.setups.split(","))


def setup_kwargs(ray_address: str | None, cores: int) -> dict[str, dict[str, Any]]:
    """Each set-up's engine settings: one engine here; one Ray actor on the same cores (its
    transport is all that differs); 2 Ray actors; 2 local worker processes."""
    return {"in-process": {},
            "ray-1": dict(data_parallel_size=1, ray_address=ray_address, cpu_threads=cores),
            "ray-2": dict(data_parallel_size=2, ray_address=ray_address, cpu_threads=max(1, cores // 2)),
            "processes-2": dict(data_parallel_size=2)}


def bench_replicas(actor: str = "smollm2-135m", *, ray_address: str | None = None, calls: int = 5,
                   n_prompts: int = 16, dtype: str = "bfloat16", only: tuple[str, ...] | None = None,
                   say: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Time generate() on each engine set-up; see the module docstring."""
    from lactchain.models.vllm_engine import VLLMActor

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    stop_cluster = None
    if ray_address is None and any(name.startswith("ray") for name in (only or SETUPS)):
        # ray-1 and ray-2 are alive at once (timed in turn, idle otherwise): room for both
        ray_address, stop_cluster = _local_cluster(2 * cores)
    setups = {name: kw for name, kw in setup_kwargs(ray_address, cores).items() if name in (only or SETUPS)}
    engines: dict[str, Any] = {}
    startup: dict[str, float] = {}
    try:
        for name, kw in setups.items():
            say(f"starting {name}")
            t0 = time.perf_counter()
            engines[name] = VLLMActor.load(actor, device="cpu", dtype=dtype, **kw)
            startup[name] = time.perf_counter() - t0
            say(f"{name} ready in {startup[name]:.0f} s")
        prompts = grid_prompts(n_prompts, engines["in-process"].moves)
        answers = {name: [s.token_ids for s in e.generate(prompts)] for name, e in engines.items()}  # warm-up
        times: dict[str, list[float]] = {name: [] for name in engines}
        for k in range(calls):  # interleaved: a slower minute hits every set-up alike
            for name, engine in engines.items():
                t0 = time.perf_counter()
                engine.generate(prompts)
                times[name].append(time.perf_counter() - t0)
            say(f"round {k + 1}/{calls}: " + ", ".join(f"{n} {t[-1]:.3f} s" for n, t in times.items()))
    finally:
        for engine in engines.values():
            engine.close()
        if stop_cluster is not None:
            stop_cluster()
    medians = {name: statistics.median(t) for name, t in times.items()}
    base = medians["in-process"]
    overhead = 100.0 * (medians["ray-1"] - base) / base if "ray-1" in medians else None
    return {
        "actor": actor, "dtype": dtype, "cores": cores, "prompts": n_prompts, "calls": calls,
        "setups": {name: {"median_s": round(m, 4), "env_steps_per_s": round(n_prompts / m, 2),
                          "startup_s": round(startup[name], 1), "calls_s": [round(t, 4) for t in times[name]]}
                   for name, m in medians.items()},
        "same_answers": all(a == answers["in-process"] for a in answers.values()),
        "ray_overhead_pct": None if overhead is None else round(overhead, 2),
        "ray_overhead_target_pct": OVERHEAD_TARGET_PCT,
        "meets_target": None if overhead is None else overhead < OVERHEAD_TARGET_PCT,
        **{f"speedup_{name}": round(base / medians[name], 3) for name in ("ray-2", "processes-2") if name in medians},
    }
