"""The generation copy after a training step: rebuilt (deep copy, merge, cast) against its
adapted weights rewritten in place (lactchain.models.merged_copy), on the actor as the loop
holds it (LoRA on, bf16 generation copy of fp32 weights), alternating 3 rounds, best kept,
and whether the two copies hold the same weights bit for bit. Prints one JSON line. Usage:
    python scripts/merged_copy_refresh_check.py [smollm2-135m | tiny]
"""
import json
import sys
import time

import torch

from lactchain.models.actor import Actor
from lactchain.train.actor_config import TrainActorConfig
from lactchain.train.lora import add_lora

torch.manual_seed(0)
actor = Actor.load(sys.argv[1] if len(sys.argv) > 1 else "smollm2-135m", device="cpu", inference_dtype="bf16")
actor.model = add_lora(actor.model, TrainActorConfig(loss="grpo"))
lora = [p for name, p in actor.model.named_parameters() if "lora_" in name]


def step() -> None:
    """One optimizer step's worth of change to the adapter."""
    with torch.no_grad():
        for p in lora:
            p.add_(0.01 * torch.randn_like(p))


def generation_copy():
    """What generate does first: notice the weights changed, then take the copy."""
    actor._sync_caches()
    return actor._generation_model()


generation_copy()  # the copy, built once
times: dict[str, list[float]] = {"rebuild": [], "refresh": []}
for _ in range(3):
    for way in ("rebuild", "refresh"):
        generation_copy()
        step()
        if way == "rebuild":
            actor.clear_prefix_cache()  # no copy to refresh: built afresh
        t0 = time.perf_counter()
        copy = generation_copy()
        times[way].append(time.perf_counter() - t0)
refreshed = {n: p.detach().clone() for n, p in copy.named_parameters()}
actor.clear_prefix_cache()
same = all(torch.equal(refreshed[n], p) for n, p in generation_copy().named_parameters())
best = {way: min(t) for way, t in times.items()}
print(json.dumps({"model": actor.name, "threads": torch.get_num_threads(), "rebuild_s": round(best["rebuild"], 3),
                  "refresh_s": round(best["refresh"], 3), "speedup": round(best["rebuild"] / best["refresh"], 2),
                  "identical_weights": same, "builds": actor.copy_builds, "refreshes": actor.copy_refreshes}))
