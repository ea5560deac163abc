"""How well the loop's TD critic ranks states, against the exact V*, when its random move
lists start from every state the actor acts from (`decision_states`, the loop's way) or
from the start states alone (the loop's way before 2026-11-30).

    python scripts/critic_vstar.py [--env taxi] [--rounds 16] [--lists 256] [--from decision|starts]

Prints one JSON line per fitted-value-iteration round: the Spearman correlation of V with
V* over the start states (what the loop logs) and over every non-terminal state. On Taxi
the start states are 300 of its 400 decision states: the passenger riding is never a start,
so fitted from the starts alone, every target that picks the passenger up reads a V(s')
nothing ever fitted. V* is the oracle: a diagnostic here, never a training signal.
"""

from __future__ import annotations

import argparse
import json
import time

from lactchain.envs.replay import decision_states
from lactchain.models.critic import Critic
from lactchain.train.critic import spearman
from lactchain.train.critic_td import TDConfig, fit_critic_td, random_transitions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--env", default="taxi")
    ap.add_argument("--critic", default="minilm-l6")
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--lists", type=int, default=256, help="random move lists per state (the loop's default)")
    ap.add_argument("--from", dest="origin", choices=("decision", "starts"), default="decision")
    ap.add_argument("--gamma", type=float, default=0.9)
    args = ap.parse_args()

    critic = Critic.load(args.critic, env=args.env)
    env = critic.env
    transitions = random_transitions(env, args.lists, seed=0)
    if args.origin == "starts":
        starts = set(env.start_states())
        transitions = [t for t in transitions if t.state in starts]
    vstar = env.solver().values(args.gamma)
    every = [s for s in decision_states(env) if s in vstar]
    print(json.dumps({"env": args.env, "from": args.origin, "transitions": len(transitions),
                      "states_with_lists": len({t.state for t in transitions}), "decision_states": len(every)}))

    def report(rnd: int, metrics: dict[str, float]) -> None:
        rho = spearman(critic.values(every), [vstar[s] for s in every])
        print(json.dumps({"round": rnd, "spearman_starts": round(metrics["spearman_vstar"], 3),
                          "spearman_every_state": round(rho, 3), "seconds": round(metrics["round_seconds"], 1)}),
              flush=True)

    t0 = time.perf_counter()
    fit_critic_td(critic, transitions, TDConfig(rounds=args.rounds, lists_per_state=args.lists, gamma=args.gamma),
                  on_round=report)
    print(json.dumps({"total_seconds": round(time.perf_counter() - t0, 1)}))


if __name__ == "__main__":
    main()
