"""Environments. Importing this registers the LactChain envs with gymnasium:
"LactChain/GridWorld-v0" and "LactChain/Blackjack-v0" (see catalog.py for the seam), and the
k-armed bandit testbed "ArmedBanditTestbed-v0" (bandit.py; not a text env)."""

import gymnasium as gym

from lactchain.envs.bandit import BANDIT_ID, MultiArmedBandit, register_bandit
from lactchain.envs.gridworld import ORIENTATIONS, GridWorldEnv, State, apply_move
from lactchain.envs.planning import Planner, all_states

ENV_ID = "LactChain/GridWorld-v0"
BLACKJACK_ID = "LactChain/Blackjack-v0"

# No TimeLimit wrapper: the envs truncate themselves after `max_actions` actions.
if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="lactchain.envs.gridworld:GridWorldEnv")
if BLACKJACK_ID not in gym.registry:
    gym.register(id=BLACKJACK_ID, entry_point="lactchain.envs.blackjack:BlackjackTextEnv")
register_bandit()

__all__ = ["BANDIT_ID", "BLACKJACK_ID", "ENV_ID", "ORIENTATIONS", "GridWorldEnv", "MultiArmedBandit", "Planner", "State", "all_states", "apply_move"]
