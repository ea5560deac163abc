"""The trajectory archive (seed 003): replayable trajectories, descriptions, the dataset form, and the
language-conditioned decision transformer trained on it (`dt`)."""
