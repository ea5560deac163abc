"""How much of the raw model's probability the move grammar's allowed tokens hold, along
the actor's own constrained samples of the grid (why GRPO scores samples under the
grammar-masked policy: lactchain.train.constrained_policy).

    python scripts/grammar_mass.py [--actor smollm2-135m] [--adapter DIR] [--every 8] [--samples 4] [--seed 7]

Prints, over every token of the samples: the allowed tokens' raw probability mass, the
sampled token's raw and masked probability, and 1 - p (the size of the log-prob
gradient on the sampled token's logit) under each.
"""

from __future__ import annotations

import argparse
import statistics as st
import time

import torch

from lactchain.bench.common import grid_starts
from lactchain.models.actor import Actor
from lactchain.train.constrained_policy import constrained_logprobs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--actor", default="smollm2-135m")
    ap.add_argument("--adapter", default=None, help="a trained LoRA adapter folder (a train-actor run's adapter/)")
    ap.add_argument("--every", type=int, default=8, help="every Nth of the 60 start states")
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    t0 = time.time()
    actor = Actor.load(args.actor, args.adapter, device="cpu")
    prompts = grid_starts(actor.moves)[0][::args.every]
    samples = actor.generate(prompts, constrained=True, temperature=1.0, num_samples=args.samples, seed=args.seed)
    automaton = actor.token_automaton()
    mass, p_raw, p_masked = [], [], []
    for prompt, s in zip([p for p in prompts for _ in range(args.samples)], samples):
        ids, comp = actor.prompt_ids(prompt), list(s.token_ids)
        targets = torch.tensor([comp])
        with torch.no_grad():
            logits = actor.model(input_ids=torch.tensor([ids + comp])).logits[:, len(ids) - 1:-1].float()
        raw = torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)[0].exp()
        masked = constrained_logprobs(logits, targets, automaton)[0][0].exp()
        p_raw += raw.tolist()
        p_masked += masked.tolist()
        mass += (raw / masked).tolist()  # the allowed tokens' raw mass: p_raw = mass * p_masked
    print(f"{len(samples)} samples, {len(mass)} tokens, {time.time() - t0:.0f} s")
    print(f"allowed mass: mean {st.mean(mass):.3f}, median {st.median(mass):.3f}; "
          f"positions under 0.9: {sum(m < 0.9 for m in mass) / len(mass):.2f}, under 0.5: {sum(m < 0.5 for m in mass) / len(mass):.2f}")
    print(f"sampled token p: raw {st.mean(p_raw):.3f}, masked {st.mean(p_masked):.3f}; "
          f"1 - p: raw {st.mean(1 - p for p in p_raw):.3f}, masked {st.mean(1 - p for p in p_masked):.3f}; "
          f"positions with no choice in effect (masked p > 0.99): {sum(p > 0.99 for p in p_masked) / len(p_masked):.2f}")


if __name__ == "__main__":
    main()
