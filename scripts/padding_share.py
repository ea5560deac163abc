"""Padding share of CPO-SimPO batches (8 pairs, 16 whole rows, 8 shuffled epochs) on one
loop's grid pairs: the most that padding-free training could save.

Usage, in a checkout whose runs/registry.db holds the pairs run: `python
scripts/padding_share.py PAIRS_RUN_ID`. Prints one JSON line."""
import json, random, sqlite3, sys
from lactchain.models.actor import Actor
from lactchain.moves import format_moves
run = sys.argv[1]
rows = sqlite3.connect("runs/registry.db").execute("select prompt, chosen, rejected from pairs where run_id=?", (run,)).fetchall()
actor = Actor.load("smollm2-135m")
lens = []
for prompt, ch, rj in rows:
    p = len(actor.prompt_ids(prompt))
    lens.append([p + actor.count_tokens(format_moves(json.loads(s))) + 1 for s in (ch, rj)])
random.seed(0)
tot_real = tot_pad = 0
for epoch in range(8):
    order = list(range(len(lens))); random.shuffle(order)
    for i in range(0, len(order), 8):
        batch = [l for j in order[i:i+8] for l in lens[j]]
        tot_real += sum(batch); tot_pad += max(batch) * len(batch)
flat = [l for pair in lens for l in pair]
print(json.dumps({"run": run, "pairs": len(lens), "row_tokens_min": min(flat), "row_tokens_mean": sum(flat)/len(flat), "row_tokens_max": max(flat), "padding_share": 1 - tot_real/tot_pad}))
