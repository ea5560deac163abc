"""Runs: the SQLite registry, a run's life (heartbeat, kill, reaping), what resumes, export, comparison."""
