"""Environments. Importing this registers the LactChain text envs with gymnasium (every
line of `catalog.REGISTRY`: "LactChain/GridWorld-v0", "LactChain/Blackjack-v0", ...; see
catalog.py for the seam) and the k-armed bandit testbed "ArmedBanditTestbed-v0"
(bandit.py; not a text env).

The other names exported here are the GRID's (its env, pose, planner and rules), kept
for grid-only code and tests; generic code goes through `lactchain.envs.catalog`
(`make_env`, `TextEnv`, `EnvState`) and `lactchain.envs.replay`.
"""

from lactchain.envs.bandit import BANDIT_ID, MultiArmedBandit, register_bandit
from lactchain.envs.catalog import ENVS, register_envs
from lactchain.envs.gridworld import ORIENTATIONS, GridWorldEnv, State, apply_move
from lactchain.envs.planning import Planner, all_states

ENV_ID = ENVS["grid"]
BLACKJACK_ID = ENVS["blackjack"]

register_envs()
register_bandit()

__all__ = ["BANDIT_ID", "BLACKJACK_ID", "ENV_ID", "ORIENTATIONS", "GridWorldEnv", "MultiArmedBandit", "Planner", "State", "all_states", "apply_move"]
