"""A language-conditioned decision transformer trained on the trajectory archive (issue 13,
seed 003): a small GPT in the nanoGPT mould that reads an instruction and a behaviour
descriptor and acts on the grid, one move at a time. Grid-only by nature: the package
reads the grid's poses, rules and scenes directly (not the generic TextEnv seam).

- `data`: archive rows -> per-move episodes (observations, actions + STOP, the
  behaviour descriptor still to go, the instruction), the seeded train/validation
  split by trajectory, padded batches;
- `tokenizer`: a word-level tokenizer learned on the archive's descriptions (HF
  `tokenizers`), or the bundled MiniLM sentence encoder, frozen, as the text encoder;
- `model`: the GPT (`DTConfig`, `DecisionTransformer`);
- `train`: the resumable registry job (`lactchain dt train`);
- `evaluate`: closed-loop rollouts on held-out instructions and BDs, the no-text
  baseline and the exact planner (an oracle) (`lactchain dt eval`).
"""
