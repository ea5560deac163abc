"""The strategy prompt: versions by name, and searching it with no weight update."""
