"""Where GRPO's advantage goes on the untrained actor's own samples of the grid: how
much of a step's |advantage| sits in groups that hold a success, with the group's std
as the scale (`--scale-rewards group`) and without it (`batch` and `none` keep the
groups' relative sizes, so they share one figure).

    python scripts/grpo_signal.py [--actor smollm2-135m] [--samples 4] [--seed 3]

Every non-goal start state of the 4x4 grid gets K constrained samples at temperature 1,
scored with the exact one-step advantage (the oracle labeler: a diagnostic of the reward's
shape, not a training signal). On this grid a failed list loses the action's discount
(~10 points of V*) and one point a move, so a group without a success differs only in
list length; scaled by its own std it weighs as much as a group with a success.
"""

from __future__ import annotations

import argparse
import statistics as st
import time
from collections import Counter, defaultdict

import torch

from lactchain.bench.common import grid_starts
from lactchain.envs.gridworld import GridWorldEnv
from lactchain.loop.labelers import OracleLabeler, sampled_groups
from lactchain.models.actor import Actor


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--actor", default="smollm2-135m")
    ap.add_argument("--samples", type=int, default=4, help="samples per start state (GRPO's group size)")
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    t0 = time.time()
    actor = Actor.load(args.actor, None, device="cpu")
    prompts, states = grid_starts(actor.moves)
    env = GridWorldEnv(moves=actor.moves)
    k = args.samples
    samples = actor.generate(prompts, constrained=True, temperature=1.0, num_samples=k, seed=args.seed)
    groups = sampled_groups(env, [s for s in states for _ in range(k)], samples, k, lambda i: (None,))
    OracleLabeler(env, 0.9).score(groups)
    mass = {"group": [0.0, 0.0], "batch/none": [0.0, 0.0]}
    by_length: dict[int, list[float]] = defaultdict(list)
    won = 0
    for g in groups:
        r = torch.tensor([c.advantage for c in g.candidates])
        success = any(c.done and c.reward > 0 for c in g.candidates)
        won += success
        scaled = (r - r.mean()) / (r.std() + 1e-4)
        for name, a in (("group", scaled), ("batch/none", r - r.mean())):
            mass[name][success] += a.abs().sum().item()
        for c, a in zip(g.candidates, scaled.tolist()):
            by_length[len(c.moves)].append(a)
    n_success = sum(c.done and c.reward > 0 for g in groups for c in g.candidates)
    print(f"{len(samples)} samples ({k} a state) in {time.time() - t0:.0f} s; successes {n_success / len(samples):.3f}; "
          f"groups with a success {won}/{len(groups)}")
    print("most sampled lists:", Counter(str(c.moves) for g in groups for c in g.candidates).most_common(3))
    print("group-scaled advantage by list length:",
          ", ".join(f"{n} moves {st.mean(v):+.2f} (x{len(v)})" for n, v in sorted(by_length.items())))
    for name, (without, with_success) in mass.items():
        print(f"scale {name}: share of the |advantage| in groups with a success {with_success / (without + with_success):.2f}")


if __name__ == "__main__":
    main()
