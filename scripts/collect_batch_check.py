"""How many start states one generate call of the loop's collect should sample (issue 46:
"all start states in one batch"; `DrawConfig.batch_states`, 8 on every device today).
Times `draw_groups` on SmolLM2 over the 60 grid start states at each batch size, in
turn, and prints JSON. The draws share one seed per call, so another batch size draws
other lists: a default per device changes that device's samples. Run it alone: it
times the machine.

    python scripts/collect_batch_check.py                       # the CPU, bf16
    python scripts/collect_batch_check.py --device cuda --batches 8,16,60
"""
import argparse
import json
import time

from lactchain.envs.catalog import make_env
from lactchain.loop.preferences import DrawConfig, draw_groups
from lactchain.models.actor import Actor

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--device", default="cpu")
parser.add_argument("--batches", default="8,60", help="start states per generate call, comma-separated")
parser.add_argument("--samples", type=int, default=4, help="lists drawn per state")
parser.add_argument("--repeats", type=int, default=2)
args = parser.parse_args()
actor = Actor.load("smollm2-135m", device=args.device, inference_dtype="bfloat16")
states = make_env("grid").start_states()
seconds: dict[str, list[float]] = {}
for _ in range(args.repeats):
    for batch in (int(b) for b in args.batches.split(",")):
        start = time.perf_counter()
        groups = draw_groups(actor, states, DrawConfig(samples=args.samples, temperature=1.0, batch_states=batch))
        seconds.setdefault(str(batch), []).append(round(time.perf_counter() - start, 2))
        assert sum(len(g.candidates) for g in groups) == len(states) * args.samples
print(json.dumps({"device": args.device, "states": len(states), "samples": args.samples, "seconds": seconds}))
