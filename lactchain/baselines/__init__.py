"""Classic RL baselines beside the LLM actor (seed 004), on the lab's envs.

- `agent`: the Agent contract, `run_agent`, random and the exact solver (an oracle).
- `td`: value iteration and the tabular learners (Q-learning, SARSA, Monte Carlo).
- `pg`: REINFORCE with a baseline and one-step actor-critic (small torch MLPs).
- `bandits`: the k-armed testbed's agents and the vectorised `simulate`.
- `train`: a classic agent trained and evaluated as a registry run (the leaderboard's rows).
- `protocol`: the leaderboard's protocol (the env a classic agent plays, greedy evaluation).
- `tabular`: the Motif line's Q-learner with learned rewards (Blackjack, one move per action)."""
