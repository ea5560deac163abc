"""The k-armed bandit testbed of Sutton & Barto ch. 2, as a gymnasium env.

Each reset draws a new problem: arm means q*(a) ~ N(0, 1) (stationary), or all q*
equal to 0 that then take independent random walks (+ N(0, 0.01^2) per arm per step,
i.e. standard deviation 0.01, the book's exercise 2.5). A pull of arm a pays
N(q*(a), 1). There is no state: the observation is always 0 of Discrete(1), and an
episode only ends by truncation (max_episode_steps of the registration).

`info` says which arm was best when it was pulled and whether the pull was optimal
(any arm tied for the best counts), which is what "% optimal action" plots need.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

BANDIT_ID = "ArmedBanditTestbed-v0"
WALK_STD = 0.01


class MultiArmedBandit(gym.Env):
    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, num_arms: int = 10, stationary: bool = True, render_mode: str | None = None) -> None:
        if int(num_arms) < 1:
            raise ValueError(f"num_arms must be at least 1, not {num_arms}")
        if render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', not {render_mode!r}")
        self.num_arms, self.stationary, self.render_mode = int(num_arms), bool(stationary), render_mode
        self.action_space = spaces.Discrete(self.num_arms)
        self.observation_space = spaces.Discrete(1)
        self.arm_means = np.zeros(self.num_arms)
        self.steps = 0
        self.last: tuple[int, float] | None = None  # (arm, reward) of the latest pull, for render

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        super().reset(seed=seed)
        if self.stationary:
            self.arm_means = self.np_random.normal(0.0, 1.0, self.num_arms)
        else:
            self.arm_means = np.zeros(self.num_arms)
        self.steps, self.last = 0, None
        return 0, {"best_arm": self.best_arm()}

    def best_arm(self) -> int:
        return int(np.argmax(self.arm_means))

    def step(self, action: Any) -> tuple[int, float, bool, bool, dict[str, Any]]:
        if not self.action_space.contains(action):
            raise ValueError(f"action must be an arm in 0..{self.num_arms - 1}, not {action!r}")
        arm = int(action)
        best = self.best_arm()
        optimal = bool(self.arm_means[arm] >= self.arm_means[best])
        reward = float(self.np_random.normal(self.arm_means[arm], 1.0))
        if not self.stationary:  # the walk happens after the pull: the reward is from q*_t
            self.arm_means = self.arm_means + self.np_random.normal(0.0, WALK_STD, self.num_arms)
        self.steps += 1
        self.last = (arm, reward)
        return 0, reward, False, False, {"best_arm": best, "optimal": optimal}

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        means = " ".join(f"{m:+.2f}" for m in self.arm_means)
        pulled = "" if self.last is None else f", pulled arm {self.last[0]} for {self.last[1]:+.3f}"
        return f"step {self.steps}{pulled}; q* = [{means}] (best arm {self.best_arm()})"


def register_bandit(max_episode_steps: int = 1000) -> None:
    """Register the testbed as seed 004 asks (idempotent: importing twice is harmless)."""
    if BANDIT_ID in gym.registry:
        return
    gym.envs.registration.register(
        id=BANDIT_ID,
        entry_point=MultiArmedBandit,
        max_episode_steps=max_episode_steps,
        nondeterministic=True,
        reward_threshold=1.0,
        kwargs={"num_arms": 10, "stationary": True},
    )
