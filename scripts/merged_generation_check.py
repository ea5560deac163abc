"""Generation with a LoRA adapter merged into a copy vs run unmerged (lactchain.models.actor:
`_generation_model`), greedy, 32 grid prompts, prefix cache off, alternating 3 rounds, best
kept; the adapter's B matrices drawn N(0, 0.02) so it is not the zero init. Usage:
    python scripts/merged_generation_check.py [smollm2-135m | tiny]
"""
import time, sys, json
import torch
from peft import LoraConfig, get_peft_model
from lactchain.models.actor import Actor
from lactchain.envs import GridWorldEnv
from lactchain.envs.gridworld import ORIENTATIONS, State
from lactchain.prompts import PromptSpec

torch.manual_seed(0)
actor = Actor.load(sys.argv[1] if len(sys.argv) > 1 else "smollm2-135m", device="cpu")
lora = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
model = get_peft_model(actor.model, lora)
for n, p in model.named_parameters():
    if "lora_B" in n:
        torch.nn.init.normal_(p, std=0.02)  # a trained-looking adapter, not the zero init
actor.model = model
env = GridWorldEnv(moves=actor.moves)
spec = PromptSpec(moves=actor.moves)
prompts = [spec.render(env.describe(State(i % 4, (i // 4) % 4, ORIENTATIONS[i % 4]))) for i in range(32)]
import lactchain.models.actor as A
real = A.room_for_a_copy
actor.prefix_cache = False  # each call runs its whole prompts: the two paths alone
t0 = time.perf_counter(); actor._generation_model(); build = time.perf_counter() - t0  # the merged copy, built once
merged = actor._inference_copy
assert merged is not None and not hasattr(merged, "peft_config")
times = {"unmerged": [], "merged": []}
answers = {}
for rnd in range(3):
    for name in ("unmerged", "merged"):
        A.room_for_a_copy = (lambda m, margin=1.25: False) if name == "unmerged" else real
        actor._inference_copy = None if name == "unmerged" else merged
        t0 = time.perf_counter()
        out = actor.generate(prompts)
        times[name].append(time.perf_counter() - t0)
        answers[name] = [s.token_ids for s in out]
print("merged copy built in %.2f s" % build)
print(json.dumps({k: [round(x, 2) for x in v] for k, v in times.items()}),
      "best ratio unmerged/merged %.2f" % (min(times["unmerged"]) / min(times["merged"])),
      "identical", answers["merged"] == answers["unmerged"],
      "agreement", sum(a == b for a, b in zip(answers["merged"], answers["unmerged"])) / len(prompts))
