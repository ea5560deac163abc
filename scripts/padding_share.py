"""Padding share of CPO-SimPO batches (8 pairs, 16 whole rows, 8 shuffled epochs) on one
loop's grid pairs: the most that padding-free training could save.

Usage, in a checkout whose runs/registry.db holds the pairs run: `python
scripts/padding_share.py PAIRS_RUN_ID`. Prints one JSON line."""

import json
import random
import sqlite3
import sys

from lactchain.models.actor import Actor
from lactchain.train.batch_budget import row_tokens

PAIRS_PER_STEP, EPOCHS = 8, 8


def main(run: str) -> None:
    rows = sqlite3.connect("runs/registry.db").execute(
        "select prompt, chosen, rejected from pairs where run_id = ?", (run,)).fetchall()
    if not rows:
        sys.exit(f"no pairs for run {run} in runs/registry.db")
    actor = Actor.load("smollm2-135m")
    lengths = []  # per pair: the tokens of its chosen and its rejected row, whole
    for prompt, chosen, rejected in rows:
        prompt_tokens = len(actor.prompt_ids(prompt))
        lengths.append([row_tokens(actor, prompt_tokens, json.loads(side)) for side in (chosen, rejected)])
    random.seed(0)
    real = padded = 0
    for _ in range(EPOCHS):
        order = list(range(len(lengths)))
        random.shuffle(order)
        for i in range(0, len(order), PAIRS_PER_STEP):
            batch = [n for j in order[i:i + PAIRS_PER_STEP] for n in lengths[j]]
            real, padded = real + sum(batch), padded + max(batch) * len(batch)
    flat = [n for pair in lengths for n in pair]
    print(json.dumps({"run": run, "pairs": len(lengths), "row_tokens_min": min(flat),
                      "row_tokens_mean": sum(flat) / len(flat), "row_tokens_max": max(flat),
                      "padding_share": 1 - real / padded}))


if __name__ == "__main__":
    main(sys.argv[1])
