"""Config parts many jobs share: which actor, which env, which strategy. Each is a
Config nested in a job's config and flattened into its options and params."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lactchain.config import Config, option
from lactchain.envs.catalog import env_field, normalize_env_field
from lactchain.envs.world import check_world, scene_field, state_text_field, world_kwargs, world_params
from lactchain.train.actor_config import ADAPTER_CHECK, ADAPTER_HELP

ACTOR_HELP = "Actor preset (tiny, smollm2-135m, mistral-7b-instruct), local path or hub id."
STRATEGY_HELP = ("Strategy prompt: a version saved in the registry (the console's editor, ctrl+s) or a text file. "
                 "Recorded in the run's params. Default: the built-in strategy.")


@dataclass
class ActorPart(Config):
    """The actor model and the adapter it starts from."""

    actor: str = option("smollm2-135m", ACTOR_HELP, form="Actor")
    adapter: str | None = option(None, ADAPTER_HELP, check=ADAPTER_CHECK, form="Adapter run")


@dataclass
class EnvPart(Config):
    """The environment (its short name or gymnasium id) and, for envs with scenes, the scene."""

    env: str = env_field()

    def check(self) -> None:
        normalize_env_field(self)


@dataclass
class SceneEnvPart(EnvPart):
    """An env that may take a scene (the grid's layouts) and a state text."""

    HELP_PANEL = "World"

    scene: str | None = scene_field()
    state_text: str = state_text_field()

    def check(self) -> None:
        super().check()
        check_world(self)

    def record_params(self) -> dict[str, str]:
        return world_params(self.env, self.scene, self.state_text)

    def env_kwargs(self) -> dict[str, Any]:
        return world_kwargs(self.scene, self.state_text)


@dataclass
class StrategyPart(Config):
    """The strategy prompt the actor reads."""

    strategy: str | None = option(None, STRATEGY_HELP, check="strategy", form="Strategy")
