"""Generation with a LoRA adapter merged into a copy vs run unmerged (lactchain.models.actor:
`_generation_model`), greedy, the first 32 start states of the grid, prefix cache off,
alternating 3 rounds, best kept; the loop's adapter (`add_lora`) with its B matrices drawn
N(0, 0.02) so it is not the zero init. Usage:
    python scripts/merged_generation_check.py [smollm2-135m | tiny]
"""
import json
import sys
import time

import torch

import lactchain.models.actor as actor_module
from lactchain.bench.common import agreement, grid_starts
from lactchain.models.actor import Actor
from lactchain.train.actor_config import TrainActorConfig
from lactchain.train.lora import add_lora

torch.manual_seed(0)
actor = Actor.load(sys.argv[1] if len(sys.argv) > 1 else "smollm2-135m", device="cpu")
actor.model = add_lora(actor.model, TrainActorConfig(loss="simpo"))
for name, p in actor.model.named_parameters():
    if "lora_B" in name:
        torch.nn.init.normal_(p, std=0.02)
prompts = grid_starts(actor.moves)[0][:32]
actor.prefix_cache = False  # each call runs its whole prompts: the two paths alone
t0 = time.perf_counter()
merged = actor._generation_model()  # the merged copy, built once
build = time.perf_counter() - t0
assert merged is actor._inference_copy and not hasattr(merged, "peft_config")
fits = actor_module.room_for_a_copy
times, answers = {"unmerged": [], "merged": []}, {}
for _ in range(3):
    for name in ("unmerged", "merged"):
        # no room for a copy: generate runs the adapter unmerged
        actor_module.room_for_a_copy = fits if name == "merged" else (lambda model, margin=1.25: False)
        actor._inference_copy = merged if name == "merged" else None
        t0 = time.perf_counter()
        answers[name] = [s.token_ids for s in actor.generate(prompts)]
        times[name].append(time.perf_counter() - t0)
print("merged copy built in %.2f s" % build)
print(json.dumps({k: [round(x, 2) for x in v] for k, v in times.items()}),
      "best ratio unmerged/merged %.2f" % (min(times["unmerged"]) / min(times["merged"])),
      "identical", answers["merged"] == answers["unmerged"],
      "agreement", agreement(answers["merged"], answers["unmerged"]))
