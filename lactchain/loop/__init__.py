"""The learning loop: rollouts, labelers, preference pairs, returns, evaluation and the pipeline itself."""
