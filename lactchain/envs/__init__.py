"""Environments. Importing this registers "LactChain/GridWorld-v0" with gymnasium."""

import gymnasium as gym

from lactchain.envs.gridworld import ORIENTATIONS, GridWorldEnv, State, apply_move
from lactchain.envs.planning import Planner, all_states

ENV_ID = "LactChain/GridWorld-v0"

if ENV_ID not in gym.registry:
    # No TimeLimit wrapper: the env truncates itself after `max_actions` actions.
    gym.register(id=ENV_ID, entry_point="lactchain.envs.gridworld:GridWorldEnv")

__all__ = ["ENV_ID", "ORIENTATIONS", "GridWorldEnv", "Planner", "State", "all_states", "apply_move"]
