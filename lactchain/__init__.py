"""LactChain: train LLMs as reinforcement-learning policies (the library; never imports the TUI)."""

from lactchain import envs  # noqa: F401  registers LactChain/GridWorld-v0

__version__ = "0.1.0"
