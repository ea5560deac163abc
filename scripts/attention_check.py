"""Grouped-query attention vs transformers' SDPA on SmolLM2 (issue 46; docs/performance.md):
64 Taxi start prompts, greedy and sampled, bf16 copy and fp32; prints how many answers
are the same and each mode's seconds. Run it alone: it times the machine.

    python scripts/attention_check.py
"""
import time, torch
from lactchain.models.actor import Actor
from lactchain.envs.catalog import make_env
from lactchain.prompts import PromptSpec
env = make_env("taxi")
for dt in (torch.bfloat16, None):
    a = Actor.load("smollm2-135m", device="cpu", inference_dtype=dt, moves=env.moves)
    spec = PromptSpec.for_env(env, moves=a.moves)
    prompts = [spec.render(env.describe(s)) for s in list(env.start_states())[:64]]
    for temp in (0.0, 1.0):
        outs = {}
        for impl in ("lactchain_grouped_sdpa", "sdpa"):
            a._generation_model().set_attn_implementation(impl)
            t = time.perf_counter()
            outs[impl] = [s.token_ids for s in a.generate(prompts, temperature=temp, seed=3)]
            outs[impl + "_s"] = round(time.perf_counter() - t, 2)
        same = sum(x == y for x, y in zip(outs["sdpa"], outs["lactchain_grouped_sdpa"]))
        print(dt, temp, "same", same, "/ 64", outs["lactchain_grouped_sdpa_s"], outs["sdpa_s"], flush=True)
