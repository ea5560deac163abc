"""Classic RL baselines beside the LLM actor: policies that act on an env's state
directly (random, the exact solver's, tabular learners)."""
