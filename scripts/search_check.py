"""How often the best candidate of a state is an optimal action, by where the candidates
come from: random move lists (the loop's `--explore`) or the beam search over the critic's
values (`--search-beam`), each ranked by a trained critic as the loop's labeler ranks them.

    python scripts/search_check.py --critic-run runs/critic-XXXX/critic [--env taxi] [--explore 256] [--beam 16]

Prints one JSON object: per source, the share of the env's decision states whose
critic-best list the exact planner rates optimal (a diagnostic: the oracle only judges),
the env moves each source ran and its seconds.
"""

from __future__ import annotations

import argparse
import json
import time

from lactchain.envs.replay import decision_states
from lactchain.loop.labelers import CriticLabeler, Group, OracleLabeler
from lactchain.loop.preferences import add_exploration
from lactchain.loop.search import add_search
from lactchain.models.critic import Critic


def optimal_share(groups: list[Group], critic: CriticLabeler, oracle: OracleLabeler) -> float:
    critic.score(groups)
    best = [max(g.candidates, key=lambda c: c.advantage) for g in groups]
    oracle.score(groups)
    return sum(c.advantage > -1e-6 for c in best) / len(groups)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--critic-run", required=True, help="a saved critic folder (runs/critic-ID/critic)")
    ap.add_argument("--explore", type=int, default=256)
    ap.add_argument("--beam", type=int, default=16)
    ap.add_argument("--gamma", type=float, default=0.9)
    args = ap.parse_args()

    critic = Critic.load(checkpoint=args.critic_run)
    env = critic.env
    labeler, oracle = CriticLabeler(critic, args.gamma), OracleLabeler(env, args.gamma)
    out: dict[str, object] = {"env": type(env).__name__, "states": len(decision_states(env))}
    for source in ("explore", "search"):
        groups = [Group(s, "") for s in decision_states(env)]
        t0 = time.perf_counter()
        if source == "explore":
            add_exploration(groups, env, args.explore, seed=0)
            moves = sum(len(c.moves) for g in groups for c in g.candidates)
        else:
            _, moves = add_search(groups, env, labeler.values, args.gamma, args.beam)
        seconds = time.perf_counter() - t0
        out[source] = {"lists_per_state": args.explore if source == "explore" else args.beam,
                       "optimal_share": round(optimal_share(groups, labeler, oracle), 4),
                       "env_moves": moves, "seconds": round(seconds, 1)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
